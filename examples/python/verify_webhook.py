import hashlib
import hmac
import time


def verify_worq_signature(secret: bytes, header: str | None, raw_body: bytes,
                          now: float | None = None, tolerance_seconds: int = 300) -> bool:
    """Whether a Worq webhook is genuine.

    header: its Worq-Signature header ("t=<unix seconds>,v1=<hex>"); raw_body: the request
    body exactly as received; secret: the server's --webhook-secret-file content without its
    trailing newline. A signature older than tolerance_seconds is refused (no replays).
    """
    fields = dict(part.strip().split("=", 1) for part in (header or "").split(",") if "=" in part)
    try:
        t = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - t) > tolerance_seconds:
        return False
    expected = hmac.new(secret, str(t).encode() + b"." + raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields.get("v1", ""))


if __name__ == "__main__":
    # python verify_webhook.py '<Worq-Signature header>' < body, secret in WORQ_WEBHOOK_SECRET
    import os
    import sys

    ok = verify_worq_signature(os.environ["WORQ_WEBHOOK_SECRET"].encode(), sys.argv[1], sys.stdin.buffer.read())
    print("verified" if ok else "rejected")
    sys.exit(0 if ok else 1)

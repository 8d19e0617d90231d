"""Token and TLS options against a real server with mutual TLS and bearer tokens. The
certificates are made by the openssl CLI (skipped without it, failed under WORQ_REQUIRE_ALL=1)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict

import pytest

import worq
from conftest import ServerProcess, make_worker, run, running

TOKENS = {"producer": "py-producer-token", "worker": "py-worker-token"}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path: Path) -> Dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    if shutil.which("openssl") is None:
        if os.environ.get("WORQ_REQUIRE_ALL") == "1":
            pytest.fail("WORQ_REQUIRE_ALL=1 but openssl is not installed")
        pytest.skip("skipping: openssl is not installed (it makes the test certificates)")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1", "-subj", "/CN=worq-py-test-ca", cwd=tmp_path)
    for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        (tmp_path / f"{name}.ext").write_text(f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n")
        _openssl("req", *ec, "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=tmp_path)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=tmp_path)
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{role} py-{role} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for role, t in TOKENS.items()))
    return {name: tmp_path / name for name in ("ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem", "tokens")}


@pytest.fixture
def secure_server(server_factory: Callable[..., ServerProcess], pki: Dict[str, Path]) -> ServerProcess:
    return server_factory(args=[
        "--tls-cert", str(pki["server.pem"]), "--tls-key", str(pki["server-key.pem"]),
        "--tls-client-ca", str(pki["ca.pem"]), "--auth-tokens", str(pki["tokens"]),
    ])


def test_mutual_tls_with_tokens_runs_a_job(secure_server: ServerProcess, pki: Dict[str, Path]) -> None:
    tls = worq.TLS.from_files(ca=pki["ca.pem"], cert=pki["client.pem"], key=pki["client-key.pem"])

    async def scenario() -> None:
        worker = make_worker(secure_server.address, "secure", token=TOKENS["worker"], tls=tls)
        worker.worker.handler("echo")(lambda job, ctx: job.args[0])
        async with running(worker), worq.Client(secure_server.address, token=TOKENS["producer"], tls=tls) as client:
            jid = await client.submit("echo", args=["over mTLS"], queue="secure")
            job = await client.wait_result(jid, timeout=10)
            assert job.state is worq.JobState.COMPLETED and job.result_text == "over mTLS"

    run(scenario())


def test_refusals_name_the_reason(secure_server: ServerProcess, pki: Dict[str, Path]) -> None:
    tls = worq.TLS.from_files(ca=pki["ca.pem"], cert=pki["client.pem"], key=pki["client-key.pem"])

    async def scenario() -> None:
        async with worq.Client(secure_server.address, tls=tls) as client:
            with pytest.raises(worq.Unauthenticated):
                await client.submit("echo", queue="secure")
        async with worq.Client(secure_server.address, token="not-a-token", tls=tls) as client:
            with pytest.raises(worq.Unauthenticated):
                await client.submit("echo", queue="secure")
        async with worq.Client(secure_server.address, token=TOKENS["worker"], tls=tls) as client:
            with pytest.raises(worq.PermissionDenied):
                await client.submit("echo", queue="secure")
        # Without a client certificate the TLS handshake itself fails.
        no_cert = worq.TLS.from_files(ca=pki["ca.pem"])
        async with worq.Client(secure_server.address, token=TOKENS["producer"], tls=no_cert, timeout=5) as client:
            with pytest.raises((worq.Unavailable, worq.DeadlineExceeded)):
                await client.submit("echo", queue="secure")

    run(scenario())


def test_tls_needs_both_cert_and_key() -> None:
    with pytest.raises(ValueError, match="cert and key"):
        worq.Client("127.0.0.1:1", tls=worq.TLS(cert=b"x"))._stubs()

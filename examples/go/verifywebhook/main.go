// Command verifywebhook checks a Worq webhook's signature:
//
//	go run ./verifywebhook '<Worq-Signature header>' < body   (secret in WORQ_WEBHOOK_SECRET)
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// VerifyWorqSignature reports whether a Worq webhook is genuine. header is its Worq-Signature
// header ("t=<unix seconds>,v1=<hex>"), rawBody the request body exactly as received, secret
// the server's --webhook-secret-file content without its trailing newline. A signature older
// than tolerance is refused, so a recorded webhook cannot be replayed later.
func VerifyWorqSignature(secret []byte, header string, rawBody []byte, now time.Time, tolerance time.Duration) bool {
	fields := map[string]string{}
	for _, part := range strings.Split(header, ",") {
		if key, value, found := strings.Cut(strings.TrimSpace(part), "="); found {
			fields[key] = value
		}
	}
	t, err := strconv.ParseInt(fields["t"], 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > tolerance {
		return false
	}
	given, err := hex.DecodeString(fields["v1"])
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%d.", t)
	mac.Write(rawBody)
	return hmac.Equal(given, mac.Sum(nil))
}

func main() {
	body, err := io.ReadAll(os.Stdin)
	if err != nil || len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: verifywebhook '<Worq-Signature header>' < body")
		os.Exit(2)
	}
	if !VerifyWorqSignature([]byte(os.Getenv("WORQ_WEBHOOK_SECRET")), os.Args[1], body, time.Now(), 5*time.Minute) {
		fmt.Println("rejected")
		os.Exit(1)
	}
	fmt.Println("verified")
}

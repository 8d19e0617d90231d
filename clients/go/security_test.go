package worq

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a client certificate,
// as PEM files in a temp dir.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyFile := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "PRIVATE KEY", der)
	}
	caKey := key()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "worq-go-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		template := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, template, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	serverKey, clientKey := key(), key()
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", leaf(2, x509.ExtKeyUsageServerAuth, serverKey)),
		serverKey:  keyFile("server-key.pem", serverKey),
		clientCert: write("client.pem", "CERTIFICATE", leaf(3, x509.ExtKeyUsageClientAuth, clientKey)),
		clientKey:  keyFile("client-key.pem", clientKey),
	}
}

// tokenFile writes a --auth-tokens file granting each role (key) its token (value).
func tokenFile(t *testing.T, tokens map[string]string) string {
	t.Helper()
	text := "# role name sha256:<hex>\n"
	for role, token := range tokens {
		sum := sha256.Sum256([]byte(token))
		text += role + " go-" + role + " sha256:" + hex.EncodeToString(sum[:]) + "\n"
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func codeOf(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codes.Unknown
}

// Over mutual TLS with tokens: a producer and a worker, each with its own token and the
// client certificate, run a job end to end; a missing token, the wrong role and a missing
// client certificate are refused.
func TestMutualTLSAndTokens(t *testing.T) {
	t.Parallel()
	certs := newPKI(t)
	tokens := map[string]string{"producer": "go-producer-token", "worker": "go-worker-token"}
	srv := startServer(t, "--tls-cert", certs.serverCert, "--tls-key", certs.serverKey,
		"--tls-client-ca", certs.ca, "--auth-tokens", tokenFile(t, tokens))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	withCert := WithTLSFiles(TLSFiles{CA: certs.ca, Cert: certs.clientCert, Key: certs.clientKey})
	connect := func(opts ...DialOption) *Client {
		c, err := Dial(ctx, srv.addr(), append(opts, WithLogger(testLogger(t)))...)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		srv.clients = append(srv.clients, c)
		return c
	}
	producer := connect(withCert, WithToken(tokens["producer"]))
	worker := connect(withCert, WithToken(tokens["worker"]))

	w := NewWorker(worker, WorkerOptions{Queues: []string{"secure"}, Logger: testLogger(t)})
	w.Handle("echo", func(ctx context.Context, job *Job) (any, error) { return job.Args[0], nil })
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	jid, err := producer.Submit(ctx, "echo", Args("over mTLS"), Queue("secure"))
	if err != nil {
		t.Fatalf("submit over mTLS with a producer token: %v", err)
	}
	job, err := producer.WaitResult(ctx, jid, 10*time.Second)
	if err != nil || job.State != StateCompleted || string(job.Result) != "over mTLS" {
		t.Fatalf("job %+v err %v, want COMPLETED with the echo", job, err)
	}

	if _, err := connect(withCert).Submit(ctx, "echo", Queue("secure")); codeOf(err) != codes.Unauthenticated {
		t.Errorf("submit without a token: %v, want Unauthenticated", err)
	}
	if _, err := worker.Submit(ctx, "echo", Queue("secure")); codeOf(err) != codes.PermissionDenied {
		t.Errorf("submit with a worker token: %v, want PermissionDenied", err)
	}
	noCert := connect(WithTLSFiles(TLSFiles{CA: certs.ca}), WithToken(tokens["producer"]))
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := noCert.Submit(short, "echo", Queue("secure")); codeOf(err) != codes.Unavailable && codeOf(err) != codes.DeadlineExceeded {
		t.Errorf("submit without a client certificate: %v, want the handshake refused (Unavailable)", err)
	}
}

func TestWithTLSFilesReportsAnUnreadableFile(t *testing.T) {
	_, err := Dial(context.Background(), "127.0.0.1:1", WithTLSFiles(TLSFiles{CA: filepath.Join(t.TempDir(), "missing.pem")}))
	if err == nil {
		t.Fatal("Dial with a missing CA file succeeded")
	}
}

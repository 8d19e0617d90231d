package worq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// WithToken sends "authorization: Bearer <token>" on every call, for servers started with
// --auth-tokens. Over plaintext the token can be read off the wire: use it with TLS except
// on loopback.
func WithToken(token string) DialOption {
	return func(c *dialConfig) {
		c.grpcOpts = append(c.grpcOpts, grpc.WithPerRPCCredentials(bearerToken("Bearer "+token)))
	}
}

type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(t)}, nil
}

// RequireTransportSecurity is false so that a loopback server without TLS can check tokens too.
func (bearerToken) RequireTransportSecurity() bool { return false }

// TLSFiles names PEM files for WithTLSFiles. Empty fields are unused.
type TLSFiles struct {
	// CA verifies the server's certificate; empty: the system's roots.
	CA string
	// Cert and Key are the client certificate, for servers that require mutual TLS (--tls-client-ca).
	Cert, Key string
}

// WithTLSFiles connects over TLS, verifying the server with files.CA and presenting
// files.Cert/Key when given. A file that cannot be read makes Dial fail.
func WithTLSFiles(files TLSFiles) DialOption {
	return func(c *dialConfig) {
		config, err := tlsConfigOf(files)
		if err != nil {
			c.err = err
			return
		}
		c.creds = credentials.NewTLS(config)
	}
}

func tlsConfigOf(files TLSFiles) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if files.CA != "" {
		pem, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, fmt.Errorf("worq: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("worq: TLS CA: no PEM certificate in %s", files.CA)
		}
		config.RootCAs = pool
	}
	if (files.Cert == "") != (files.Key == "") {
		return nil, fmt.Errorf("worq: TLS client certificate: give both Cert and Key, or neither")
	}
	if files.Cert != "" {
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("worq: TLS client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

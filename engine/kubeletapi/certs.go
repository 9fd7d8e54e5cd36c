package kubeletapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// LoadClientCAs reads a PEM bundle (--client-ca-file).
func LoadClientCAs(path string) (*x509.CertPool, error) {
	pool, err := certutil.NewPool(path)
	if err != nil {
		return nil, fmt.Errorf("read --client-ca-file: %w", err)
	}
	return pool, nil
}

// ServingCert returns the serving certificate: the given pair
// (--tls-cert-file, --tls-private-key-file) when certFile is set, else the
// self-signed one under dir (<dir>/speclet.crt and speclet.key), made on
// first use for host names and IPs and kept while it is valid for another
// day, as kubelet keeps its kubelet.crt. It is made as kubelet makes its
// own: client-go's GenerateSelfSignedCertKey (a one-year certificate for
// the node name, localhost, 127.0.0.1 and ips, signed by a CA made for it;
// the file holds both).
func ServingCert(certFile, keyFile, dir, nodeName string, ips []net.IP, now time.Time) (tls.Certificate, string, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return tls.Certificate{}, "", errors.New("--tls-cert-file and --tls-private-key-file: give both or neither")
		}
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("load --tls-cert-file/--tls-private-key-file: %w", err)
		}
		return c, certFile, nil
	}
	crt, key := filepath.Join(dir, "speclet.crt"), filepath.Join(dir, "speclet.key")
	if c, err := tls.LoadX509KeyPair(crt, key); err == nil && c.Leaf != nil && now.Add(24*time.Hour).Before(c.Leaf.NotAfter) && coversIPs(c.Leaf, ips) {
		return c, crt, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("create certificate directory: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(nodeName, append([]net.IP{net.ParseIP("127.0.0.1")}, ips...), []string{"localhost"})
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("create self-signed certificate: %w", err)
	}
	if err := keyutil.WriteKey(key, keyPEM); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("write self-signed key: %w", err)
	}
	if err := certutil.WriteCert(crt, certPEM); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("write self-signed certificate: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	return c, crt, err
}

func coversIPs(c *x509.Certificate, ips []net.IP) bool {
	for _, ip := range ips {
		if c.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

package kubeletapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// LoadClientCAs reads a PEM bundle (--client-ca-file).
func LoadClientCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--client-ca-file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// ServingCert returns the serving certificate: the given pair
// (--tls-cert-file, --tls-private-key-file) when certFile is set, else the
// self-signed one under dir (<dir>/speclet.crt and speclet.key), made on
// first use for host names and IPs and kept while it is valid for another
// day, as kubelet keeps its kubelet.crt.
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
	certPEM, keyPEM, err := selfSigned(nodeName, ips, now)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("write self-signed key: %w", err)
	}
	if err := os.WriteFile(crt, certPEM, 0o644); err != nil {
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

// selfSigned makes a one-year self-signed serving certificate (its own CA,
// as kubelet's), for the node name, localhost and ips.
func selfSigned(nodeName string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", nodeName, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{nodeName, "localhost"},
		IPAddresses:           append([]net.IP{net.ParseIP("127.0.0.1")}, ips...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("create self-signed certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

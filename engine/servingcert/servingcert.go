// Package servingcert gets the kubelet API's serving certificate from the
// cluster, as kubelet does with --rotate-server-certificates: it creates a
// CertificateSigningRequest (signer kubernetes.io/kubelet-serving) for
// CN=system:node:<node>, O=system:nodes, with the node's host name and
// addresses as subject alternative names, waits until it is approved (by an
// administrator or an approving controller: kube-controller-manager does not
// approve this signer) and issued (kube-controller-manager's csrsigning
// controller), stores it, serves it, and renews it the same way at a
// jittered 70–90% of its lifetime.
//
// Contracts:
//   - The key is a new ECDSA P-256 key per request; the usages are kubelet's
//     for a non-RSA key: digital signature and server auth (key encipherment
//     only applies to RSA keys).
//   - The certificate and its key are written together, PEM, to
//     <Dir>/kubelet-server-<YYYY-MM-DD-HH-MM-SS>.pem (mode 0600), and the
//     symlink <Dir>/kubelet-server-current.pem is moved to it, as kubelet's
//     certificate store does. At start a current certificate that is still
//     valid and names the node's addresses is served without a new request.
//   - GetCertificate (for tls.Config) returns the newest certificate, so a
//     renewal takes effect at the next handshake without a restart; before
//     the first one is issued it returns an error and handshakes fail.
//   - A denied or failed request, or one not issued within 15 minutes, is
//     logged and retried after a backoff (2 s doubling to 5 min); the
//     current certificate keeps being served meanwhile.
//   - Time (rotation deadlines, backoff, file names) comes from the injected
//     Clock.
package servingcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// SignerName is the signer of kubelet serving certificates.
const SignerName = certv1.KubeletServingSignerName

// Usages are what a request asks for (kubelet's, for an ECDSA key).
var Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}

// CurrentFile is the symlink to the certificate being served, in Dir.
const CurrentFile = "kubelet-server-current.pem"

// waitTimeout is how long a request may wait for approval and issuance
// before a new one is made (kubelet's certificateWaitTimeout).
const waitTimeout = 15 * time.Minute

// Clock is the time the manager reads and waits on.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Manager.
type Config struct {
	// Client has the node's credentials (system:node:<NodeName>): the Node
	// authorizer lets a node create, get, list and watch its CSRs.
	Client   kubernetes.Interface
	NodeName string
	// DNSNames and IPs are the subject alternative names: the node's host
	// name and addresses (at least one of them).
	DNSNames []string
	IPs      []net.IP
	// Dir holds the certificates (kubelet: <root-dir>/pki).
	Dir   string
	Clock Clock          // nil: the real clock
	Rand  func() float64 // in [0,1), places the renewal in 70–90%; nil: random
	Log   *slog.Logger
}

// Manager holds the serving certificate and renews it.
type Manager struct {
	c        Config
	mu       sync.Mutex
	cert     *tls.Certificate
	deadline time.Time // when to renew cert
	pending  string    // the CSR waited for, for messages
}

// New returns a manager serving the stored current certificate when it is
// still valid for the node's names; Run gets one otherwise.
func New(c Config) (*Manager, error) {
	if c.Client == nil || c.NodeName == "" || c.Dir == "" {
		return nil, errors.New("serving certificate: Client, NodeName and Dir are required")
	}
	if len(c.DNSNames) == 0 && len(c.IPs) == 0 {
		return nil, errors.New("serving certificate: no host name or address to certify")
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Rand == nil {
		c.Rand = mrand.Float64
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("serving certificate: create %s: %w", c.Dir, err)
	}
	m := &Manager{c: c}
	if cert, err := tls.LoadX509KeyPair(filepath.Join(c.Dir, CurrentFile), filepath.Join(c.Dir, CurrentFile)); err == nil {
		if c.Clock.Now().Before(cert.Leaf.NotAfter) && m.covers(cert.Leaf) {
			m.set(&cert)
		}
	}
	return m, nil
}

// covers says whether a certificate names everything the node asks for.
func (m *Manager) covers(c *x509.Certificate) bool {
	for _, d := range m.c.DNSNames {
		if !slices.Contains(c.DNSNames, d) {
			return false
		}
	}
	for _, ip := range m.c.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return c.Subject.CommonName == "system:node:"+m.c.NodeName
}

// set serves cert from now on and places its renewal at 70–90% of its
// lifetime (kubelet's jitter), to the second.
func (m *Manager) set(cert *tls.Certificate) {
	leaf := cert.Leaf
	total := leaf.NotAfter.Sub(leaf.NotBefore)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cert = cert
	m.deadline = leaf.NotBefore.Add(time.Duration(float64(total) * (0.7 + 0.2*m.c.Rand()))).Round(time.Second)
}

// Current is the certificate served now, nil before the first is issued.
func (m *Manager) Current() *tls.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cert
}

// Deadline is when the current certificate is renewed (zero without one).
func (m *Manager) Deadline() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deadline
}

// GetCertificate is tls.Config.GetCertificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cert == nil {
		if m.pending != "" {
			return nil, fmt.Errorf("no serving certificate yet: CertificateSigningRequest %s waits for approval and issuance", m.pending)
		}
		return nil, errors.New("no serving certificate yet")
	}
	return m.cert, nil
}

// Run gets a certificate when there is none and renews it at its deadline
// until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	backoff := 2 * time.Second
	for {
		cert, deadline := m.Current(), m.Deadline()
		if now := m.c.Clock.Now(); cert == nil || !now.Before(deadline) {
			if err := m.renew(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				m.c.Log.Error("serving certificate: request failed; retrying", "after", backoff, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-m.c.Clock.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Minute)
				continue
			}
			backoff = 2 * time.Second
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.c.Clock.After(deadline.Sub(m.c.Clock.Now())):
		}
	}
}

// renew requests, waits for, stores and serves a new certificate. The
// request and its wait are client-go's, as kubelet's certificate manager
// makes them (util/certificate/csr: an informer on the request that ends
// when it carries a certificate, or is denied, failed or deleted).
func (m *Manager) renew(ctx context.Context) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	req, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + m.c.NodeName, Organization: []string{"system:nodes"}},
		m.c.DNSNames, m.c.IPs)
	if err != nil {
		return fmt.Errorf("create certificate request: %w", err)
	}
	name, uid, err := csr.RequestCertificateWithContext(ctx, m.c.Client, req, "", SignerName, nil, Usages, key)
	if err != nil {
		return fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	m.mu.Lock()
	m.pending = name
	m.mu.Unlock()
	m.c.Log.Info("serving certificate: CertificateSigningRequest created; it needs an approval", "csr", name, "signer", SignerName,
		"dns", m.c.DNSNames, "ips", m.c.IPs)
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, m.c.Client, name, uid)
	if err != nil {
		if wctx.Err() != nil {
			err = wctx.Err()
		}
		return fmt.Errorf("CertificateSigningRequest %s: not issued: %w", name, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	pair := append(append([]byte(nil), certPEM...), keyPEM...)
	cert, err := tls.X509KeyPair(pair, pair)
	if err != nil {
		return fmt.Errorf("CertificateSigningRequest %s: issued certificate: %w", name, err)
	}
	path, err := m.store(pair)
	if err != nil {
		return err
	}
	m.set(&cert)
	m.mu.Lock()
	m.pending = ""
	m.mu.Unlock()
	m.c.Log.Info("serving certificate: issued", "csr", name, "file", path, "notAfter", cert.Leaf.NotAfter, "renewAt", m.Deadline())
	return nil
}

// store writes the pair as kubelet-server-<time>.pem and moves the current
// symlink to it.
func (m *Manager) store(pair []byte) (string, error) {
	name := "kubelet-server-" + m.c.Clock.Now().Format("2006-01-02-15-04-05") + ".pem"
	path := filepath.Join(m.c.Dir, name)
	if err := os.WriteFile(path, pair, 0o600); err != nil {
		return "", fmt.Errorf("store serving certificate: %w", err)
	}
	tmp := filepath.Join(m.c.Dir, CurrentFile+".tmp")
	os.Remove(tmp)
	if err := os.Symlink(name, tmp); err != nil {
		return "", fmt.Errorf("store serving certificate: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(m.c.Dir, CurrentFile)); err != nil {
		return "", fmt.Errorf("store serving certificate: %w", err)
	}
	return path, nil
}

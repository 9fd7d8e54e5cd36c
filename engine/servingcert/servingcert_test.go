package servingcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// signer plays the administrator and kube-controller-manager: each time
// the manager starts watching its request, it checks the request and
// denies it or approves and signs it for a lifetime of 10 days.
type signer struct {
	t       *testing.T
	cs      *fake.Clientset
	clock   *clocktesting.FakeClock
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	mu      sync.Mutex
	deny    int // deny this many requests first
	seen    []string
	watches chan struct{}
}

func newSigner(t *testing.T, clock *clocktesting.FakeClock) *signer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster CA"},
		NotBefore: clock.Now().Add(-time.Hour), NotAfter: clock.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	s := &signer{t: t, cs: fake.NewSimpleClientset(), clock: clock, ca: ca, caKey: key, watches: make(chan struct{}, 10)}
	n := 0
	s.cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certv1.CertificateSigningRequest)
		if csr.Name == "" { // the fake does not generate names
			n++
			csr.Name = fmt.Sprintf("%s%d", csr.GenerateName, n)
		}
		return false, nil, nil
	})
	// the fake does not filter by field: the manager lists and watches
	// its request by name
	gvr := certv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	named := func(sel fields.Selector, obj runtime.Object) bool {
		csr, ok := obj.(*certv1.CertificateSigningRequest)
		return !ok || sel == nil || sel.Matches(fields.Set{"metadata.name": csr.Name})
	}
	s.cs.PrependReactor("list", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := s.cs.Tracker().List(gvr, certv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "")
		if err != nil {
			return true, nil, err
		}
		list := obj.(*certv1.CertificateSigningRequestList)
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		list.Items = slices.DeleteFunc(list.Items, func(c certv1.CertificateSigningRequest) bool { return !named(sel, &c) })
		return true, list, nil
	})
	s.cs.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := s.cs.Tracker().Watch(gvr, "")
		s.watches <- struct{}{}
		if err != nil {
			return true, nil, err
		}
		sel := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return e, named(sel, e.Object) }), nil
	})
	go func() {
		for range s.watches {
			s.answer()
		}
	}()
	return s
}

// answer denies or signs the requests not answered yet.
func (s *signer) answer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	list, err := s.cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Error(err)
		return
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if slices.Contains(s.seen, csr.Name) {
			continue
		}
		s.seen = append(s.seen, csr.Name)
		if err := checkRequest(csr); err != nil {
			s.t.Errorf("request %s: %v", csr.Name, err)
		}
		if s.deny > 0 {
			s.deny--
			csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
				Type: certv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "NotToday"})
		} else {
			csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
				Type: certv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "Test"})
			csr.Status.Certificate = s.sign(csr)
		}
		if _, err := s.cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			s.t.Error(err)
		}
	}
}

// checkRequest checks what kube-apiserver and the kubelet-serving signer
// require of a request.
func checkRequest(csr *certv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != "kubernetes.io/kubelet-serving" {
		return fmt.Errorf("signer %q", csr.Spec.SignerName)
	}
	if !slices.Equal(csr.Spec.Usages, []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}) {
		return fmt.Errorf("usages %v", csr.Spec.Usages)
	}
	b, _ := pem.Decode(csr.Spec.Request)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("request is no PEM CERTIFICATE REQUEST")
	}
	r, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return err
	}
	if r.Subject.CommonName != "system:node:node-a" || !slices.Equal(r.Subject.Organization, []string{"system:nodes"}) {
		return fmt.Errorf("subject %v", r.Subject)
	}
	if !slices.Equal(r.DNSNames, []string{"node-a"}) || len(r.IPAddresses) != 1 || !r.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		return fmt.Errorf("names %v %v", r.DNSNames, r.IPAddresses)
	}
	return nil
}

func (s *signer) sign(csr *certv1.CertificateSigningRequest) []byte {
	b, _ := pem.Decode(csr.Spec.Request)
	r, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		s.t.Error(err)
		return nil
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	now := s.clock.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: serial, Subject: r.Subject,
		DNSNames: r.DNSNames, IPAddresses: r.IPAddresses, NotBefore: now, NotAfter: now.Add(10 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		s.ca, r.PublicKey, s.caKey)
	if err != nil {
		s.t.Error(err)
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (s *signer) requests() int {
	list, _ := s.cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	return len(list.Items)
}

// eventually waits (in real time) for cond, the manager running beside.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func serial(m *Manager) string {
	if c := m.Current(); c != nil {
		return c.Leaf.SerialNumber.String()
	}
	return ""
}

// TestRenewal: the first request is denied, so the manager retries after
// 2 s of its clock; the second is issued and served and stored as
// kubelet-server-current.pem. With the jitter at its middle the renewal
// is at 80% of the 10 days: a second before, the manager still waits; at
// it, a new request is made and its certificate replaces the first in
// GetCertificate and on disk. A new manager on the same directory serves
// the stored certificate without a request.
func TestRenewal(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(t0)
	s := newSigner(t, clock)
	s.deny = 1
	dir := t.TempDir()
	cfg := Config{Client: s.cs, NodeName: "node-a", DNSNames: []string{"node-a"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Dir: dir, Clock: clock, Rand: func() float64 { return 0.5 }}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetCertificate(nil); err == nil {
		t.Fatal("a certificate before any was issued")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// denied: the manager waits 2 s of its clock, then asks again
	eventually(t, "the denied request's backoff", func() bool { return s.requests() == 1 && clock.HasWaiters() })
	if m.Current() != nil {
		t.Fatal("a certificate after a denial")
	}
	clock.Step(2 * time.Second)
	eventually(t, "the first certificate", func() bool { return m.Current() != nil })
	first := serial(m)
	if got, err := m.GetCertificate(nil); err != nil || got.Leaf.SerialNumber.String() != first {
		t.Errorf("GetCertificate: %v", err)
	}
	issuedAt := t0.Add(2 * time.Second)
	if want := issuedAt.Add(8 * 24 * time.Hour); !m.Deadline().Equal(want) {
		t.Errorf("renewal at %s, want %s (80%% of 10 days)", m.Deadline(), want)
	}
	link, err := os.Readlink(filepath.Join(dir, CurrentFile))
	if want := "kubelet-server-2026-11-23-10-00-02.pem"; err != nil || link != want {
		t.Errorf("%s -> %q (%v), want %s", CurrentFile, link, err, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, link)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stored pair: %v %v, want mode 0600", fi, err)
	}

	// a second before the deadline the manager still waits
	eventually(t, "the manager waiting for the deadline", clock.HasWaiters)
	clock.SetTime(m.Deadline().Add(-time.Second))
	if !clock.HasWaiters() || s.requests() != 2 {
		t.Fatalf("before the deadline: waiting %v, %d requests; want waiting, 2", clock.HasWaiters(), s.requests())
	}
	clock.Step(time.Second)
	eventually(t, "the renewed certificate", func() bool { return serial(m) != first })
	if s.requests() != 3 {
		t.Errorf("%d requests, want 3 (denied, first, renewal)", s.requests())
	}
	second := serial(m)
	link, _ = os.Readlink(filepath.Join(dir, CurrentFile))
	if want := "kubelet-server-" + issuedAt.Add(8*24*time.Hour).Format("2006-01-02-15-04-05") + ".pem"; link != want {
		t.Errorf("after the renewal %s -> %q, want %s", CurrentFile, link, want)
	}
	cancel()
	<-done

	// a restart serves what is stored
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if serial(again) != second {
		t.Errorf("after a restart: serving %q, want the stored %q", serial(again), second)
	}
	if s.requests() != 3 {
		t.Errorf("a restart made a request")
	}
	// another node name is not covered: the stored certificate is not served
	other := cfg
	other.NodeName, other.DNSNames = "node-b", []string{"node-b"}
	if m, _ := New(other); m.Current() != nil {
		t.Error("node-b serves node-a's certificate")
	}
}

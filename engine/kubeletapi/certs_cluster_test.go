package kubeletapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// csrAdmin is the administrator of TestCluster's serving certificates.
type csrAdmin struct {
	ctx   context.Context
	admin kubernetes.Interface
	n     *node
	caPEM []byte
}

// approve waits for the node's request, checks it and approves it as an
// administrator would.
func (a csrAdmin) approve(t *testing.T) {
	t.Helper()
	var csr *certv1.CertificateSigningRequest
	a.n.waitFor(t, "a CertificateSigningRequest of node-a", func() bool {
		l, err := a.admin.CertificatesV1().CertificateSigningRequests().List(a.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			if l.Items[i].Spec.Username == "system:node:node-a" && len(l.Items[i].Status.Conditions) == 0 {
				csr = &l.Items[i]
				return true
			}
		}
		return false
	})
	if err := checkServingCSR(csr); err != nil {
		t.Fatalf("CertificateSigningRequest %s: %v", csr.Name, err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "AdminApproved", Message: "approved by the test"})
	if _, err := a.admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(a.ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// served is the certificate the node's API serves, verified with the
// cluster CA.
func (a csrAdmin) served(t *testing.T) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.caPEM)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(a.n.base, "https://"), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS to the kubelet API with the cluster CA: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// checkServingCSR checks a node's request as the kubelet-serving signer
// needs it: the signer, kubelet's usages, the node's identity as requester,
// and a request for CN=system:node:node-a, O=system:nodes naming node-a
// and 127.0.0.1.
func checkServingCSR(csr *certv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != "kubernetes.io/kubelet-serving" {
		return fmt.Errorf("signer %q", csr.Spec.SignerName)
	}
	if !slices.Equal(csr.Spec.Usages, []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}) {
		return fmt.Errorf("usages %v", csr.Spec.Usages)
	}
	if !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return fmt.Errorf("requester %s %v: want the node", csr.Spec.Username, csr.Spec.Groups)
	}
	b, _ := pem.Decode(csr.Spec.Request)
	if b == nil {
		return fmt.Errorf("request is not PEM")
	}
	r, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return err
	}
	if r.Subject.CommonName != "system:node:node-a" || !slices.Equal(r.Subject.Organization, []string{"system:nodes"}) ||
		!slices.Equal(r.DNSNames, []string{"node-a"}) || len(r.IPAddresses) != 1 || !r.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		return fmt.Errorf("request for %s, names %v %v", r.Subject, r.DNSNames, r.IPAddresses)
	}
	return nil
}

// registerNode creates Node name with the kubelet endpoint port and the
// addresses the API server proxies to. kube-controller-manager's node
// controllers write a new Node too, so the status goes on the latest
// version.
func registerNode(ctx context.Context, tb testing.TB, admin kubernetes.Interface, name string, port int32, addrs ...v1.NodeAddress) {
	tb.Helper()
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = addrs
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
}

package volume

import (
	"context"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// API is what configMap, secret and projected volumes read from the API
// server. Errors for a missing object must satisfy
// k8s.io/apimachinery/pkg/api/errors.IsNotFound (as client-go's do).
type API interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// CreateToken asks the TokenRequest API for a token of the service
	// account.
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authv1.TokenRequest) (*authv1.TokenRequest, error)
}

// Clientset adapts a client-go clientset (the agent's --kubeconfig client)
// to API.
func Clientset(cs kubernetes.Interface) API { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) GetConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	return c.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) GetSecret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	return c.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) CreateToken(ctx context.Context, ns, sa string, req *authv1.TokenRequest) (*authv1.TokenRequest, error) {
	return c.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
}

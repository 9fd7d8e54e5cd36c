package kubeletapi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of a request without credentials when anonymous
// access is on (kubelet's --anonymous-auth).
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// TokenReviewer checks a bearer token; ok is false when the token is not
// valid (the request gets 401).
type TokenReviewer interface {
	ReviewToken(ctx context.Context, token string) (u User, ok bool, err error)
}

// Attributes is what an authorizer decides on: kubelet's mapping of a
// request to a verb on a subresource of the node object.
type Attributes struct {
	User        User
	Verb        string // get, create, update, patch, delete
	Node        string // the node's name: the resource name
	Subresource string // proxy, log, stats, metrics, healthz, pods, configz
	Path        string
}

// Authorizer decides on a request; reason is shown in the 403.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AlwaysAllow allows every authenticated request.
type AlwaysAllow struct{}

// Authorize implements Authorizer.
func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string, error) { return true, "", nil }

// verbOf maps an HTTP method to an API verb, as kubelet does.
func verbOf(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// subresourcesOf returns the subresources a path needs, in order: a request is
// allowed when the first one is, or, for the fine-grained ones (kubelet v1.34's
// KubeletFineGrainedAuthz, on by default), when the broader nodes/proxy is.
//
//	/stats/*        stats
//	/metrics/*      metrics
//	/logs/*         log     (the node's log files; container logs are proxy)
//	/healthz        healthz, then proxy
//	/pods           pods, then proxy
//	/configz        configz, then proxy
//	everything else proxy
func subresourcesOf(path string) []string {
	hasPrefix := func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") }
	switch {
	case hasPrefix("/stats"):
		return []string{"stats"}
	case hasPrefix("/metrics"):
		return []string{"metrics"}
	case hasPrefix("/logs"):
		return []string{"log"}
	case hasPrefix("/healthz"):
		return []string{"healthz", "proxy"}
	case hasPrefix("/pods"):
		return []string{"pods", "proxy"}
	case hasPrefix("/configz"):
		return []string{"configz", "proxy"}
	}
	return []string{"proxy"}
}

// userFromCert returns the user a verified client certificate names: CN is
// the user, O the groups (as the API server's x509 authenticator).
func userFromCert(c *x509.Certificate) User {
	return User{Name: c.Subject.CommonName, Groups: append([]string(nil), c.Subject.Organization...)}
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	t := strings.TrimSpace(h[len(p):])
	return t, t != ""
}

// APIReviewer checks tokens and authorizes requests through the API server:
// TokenReview and SubjectAccessReview, as kubelet's webhook authenticator
// and authorizer do. Each call asks the API server: NewCachedTokens and
// NewCachedAuthorizer add kubelet's caches.
type APIReviewer struct {
	Client    kubernetes.Interface
	Audiences []string // TokenReview audiences; empty: the API server's
}

// ReviewToken implements TokenReviewer.
func (a *APIReviewer) ReviewToken(ctx context.Context, token string) (User, bool, error) {
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return User{}, false, nil
	}
	u := tr.Status.User
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	return User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

// Authorize implements Authorizer with a SubjectAccessReview on
// nodes/<subresource> of the node.
func (a *APIReviewer) Authorize(ctx context.Context, at Attributes) (bool, string, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range at.User.Extra {
		extra[k] = v
	}
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: at.User.Name, UID: at.User.UID, Groups: at.User.Groups, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: at.Verb, Group: "", Version: "v1", Resource: "nodes", Subresource: at.Subresource, Name: at.Node,
			},
		}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// errUnauthorized is a request without valid credentials.
var errUnauthorized = errors.New("Unauthorized")

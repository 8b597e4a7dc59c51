package subresources

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// User is who the apiserver says made the request.
type User struct {
	Name   string
	Groups []string
	Extra  map[string]authorizationv1.ExtraValue
}

// RequestHeader authenticates requests that the apiserver's aggregation layer forwards: the
// caller must present a client certificate from the front-proxy CA with an allowed name, and then
// the identity headers are trusted.
type RequestHeader struct {
	ClientCAs     *x509.CertPool
	AllowedNames  []string
	UserHeaders   []string
	GroupHeaders  []string
	ExtraPrefixes []string
}

// LoadRequestHeader reads the front-proxy settings the apiserver publishes for extension servers.
func LoadRequestHeader(ctx context.Context, kube kubernetes.Interface) (*RequestHeader, error) {
	cm, err := kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read extension-apiserver-authentication: %w", err)
	}
	rh := &RequestHeader{ClientCAs: x509.NewCertPool()}
	if !rh.ClientCAs.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		return nil, errors.New("extension-apiserver-authentication has no requestheader-client-ca-file")
	}
	for key, dst := range map[string]*[]string{
		"requestheader-allowed-names":        &rh.AllowedNames,
		"requestheader-username-headers":     &rh.UserHeaders,
		"requestheader-group-headers":        &rh.GroupHeaders,
		"requestheader-extra-headers-prefix": &rh.ExtraPrefixes,
	} {
		if v := cm.Data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), dst); err != nil {
				return nil, fmt.Errorf("extension-apiserver-authentication %s: %w", key, err)
			}
		}
	}
	return rh, nil
}

// Authenticate returns the forwarded user, or an error when the caller is not the front proxy.
func (rh *RequestHeader) Authenticate(r *http.Request) (User, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, errors.New("no client certificate")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rh.ClientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return User{}, fmt.Errorf("client certificate: %w", err)
	}
	if len(rh.AllowedNames) > 0 && !slices.Contains(rh.AllowedNames, leaf.Subject.CommonName) {
		return User{}, fmt.Errorf("client certificate %q is not an allowed front proxy", leaf.Subject.CommonName)
	}
	var u User
	for _, h := range rh.UserHeaders {
		if u.Name = r.Header.Get(h); u.Name != "" {
			break
		}
	}
	if u.Name == "" {
		return User{}, errors.New("no user in the request headers")
	}
	for _, h := range rh.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, prefix := range rh.ExtraPrefixes {
			if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				key, err := url.PathUnescape(strings.ToLower(name[len(prefix):]))
				if err != nil {
					continue
				}
				if u.Extra == nil {
					u.Extra = map[string]authorizationv1.ExtraValue{}
				}
				u.Extra[key] = append(u.Extra[key], values...)
			}
		}
	}
	return u, nil
}

// Authorizer asks the apiserver whether a user may do something, as RBAC sees it.
type Authorizer struct{ Kube kubernetes.Interface }

// Allowed runs a SubjectAccessReview for verb on resource/subresource in the core's API group.
func (a Authorizer) Allowed(ctx context.Context, u User, verb, ns, resource, sub, name string) (bool, string, error) {
	sar, err := a.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, Groups: u.Groups, Extra: u.Extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: virtapicontract.SubresourcesGroup, Version: virtapicontract.SubresourcesVersion,
				Resource: resource, Subresource: sub, Name: name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

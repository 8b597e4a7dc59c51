package nodeagent

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// envSource reads configMaps and secrets from the API for env and volumes.
func (p *Provider) envSource(pod *corev1.Pod, podIP string) EnvSource {
	get := func() (context.Context, context.CancelFunc) { return context.WithTimeout(p.ctx, 15*time.Second) }
	return EnvSource{
		Pod: pod, PodIP: podIP, HostIP: p.hostIP,
		NodeAllocatable: p.cfg.allocatable(),
		APIHost:         p.apiHost, APIPort: p.apiPort,
		ConfigMap: func(ns, name string) (*corev1.ConfigMap, error) {
			ctx, cancel := get()
			defer cancel()
			return p.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Secret: func(ns, name string) (*corev1.Secret, error) {
			ctx, cancel := get()
			defer cancel()
			return p.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
	}
}

// volumeSource reads volume contents from the API. Tokens are kept in the pod's cache until they
// are due for renewal, so the periodic volume refresh does not ask for a new one every time.
func (p *Provider) volumeSource(r *podRuntime, pod *corev1.Pod, podIP string) VolumeSource {
	return VolumeSource{
		Env:    p.envSource(pod, podIP),
		CACert: p.caCert,
		Token: func(ctx context.Context, sa, audience string, exp int64) (Token, error) {
			key := fmt.Sprintf("%s|%s|%d", sa, audience, exp)
			r.mu.Lock()
			cached, ok := r.tokens[key]
			r.mu.Unlock()
			if ok && time.Now().Before(cached.RefreshAt()) {
				return cached, nil
			}
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: &exp,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}
			if audience != "" {
				req.Spec.Audiences = []string{audience}
			}
			if sa == "" {
				sa = "default"
			}
			issued := time.Now()
			tr, err := p.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
			if err != nil {
				return Token{}, err
			}
			t := Token{Value: tr.Status.Token, Issued: issued, Expires: tr.Status.ExpirationTimestamp.Time}
			r.mu.Lock()
			r.tokens[key] = t
			r.mu.Unlock()
			return t, nil
		},
		ClaimPath: func(ctx context.Context, ns, claim string) (string, error) {
			pvc, err := p.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
				return "", fmt.Errorf("persistentVolumeClaim %q is not bound", claim)
			}
			pv, err := p.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			switch {
			case pv.Spec.HostPath != nil:
				if err := checkHostPath(pv.Spec.HostPath.Path, pv.Spec.HostPath.Type); err != nil {
					return "", err
				}
				return pv.Spec.HostPath.Path, nil
			case pv.Spec.Local != nil:
				return localVolumePath(pv)
			}
			return "", fmt.Errorf("persistentVolume %q is neither hostPath nor local", pv.Name)
		},
	}
}

// automount tells whether the pod gets its service-account token: the pod's setting, else the
// service account's, else yes.
func (p *Provider) automount(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	got, err := p.kube.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("service account %q: %w", sa, err)
	}
	if got.AutomountServiceAccountToken != nil {
		return *got.AutomountServiceAccountToken, nil
	}
	return true, nil
}

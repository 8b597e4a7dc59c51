// Package cabundle puts the webhook server's CA into the chart's ValidatingWebhookConfiguration
// and MutatingWebhookConfiguration (both of one name) when virtualization-controller starts. The chart issues the serving certificate into a Secret
// (docs/chart.md) and writes the configuration without a caBundle, since one template cannot
// hand the CA it generated to another; the controller, which mounts the Secret, patches it in.
package cabundle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Patcher sets the caBundle of every webhook of the ValidatingWebhookConfiguration and the
// MutatingWebhookConfiguration of one name.
type Patcher struct {
	kube kubernetes.Interface
	name string
	ca   []byte
	log  logr.Logger
	poll time.Duration
}

// NewPatcher patches the two configurations name with ca.
func NewPatcher(kube kubernetes.Interface, name string, ca []byte, log logr.Logger, poll time.Duration) *Patcher {
	return &Patcher{kube: kube, name: name, ca: ca, log: log, poll: poll}
}

// Start patches, retrying until it succeeds or ctx ends. It implements manager.Runnable; every
// replica patches (the same bundle), so a new leader never waits for it.
func (p *Patcher) Start(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, p.poll, true, func(ctx context.Context) (bool, error) {
		if err := p.Patch(ctx); err != nil {
			p.log.Info("webhook caBundle: retrying", "configuration", p.name, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("caBundle of %s: %w", p.name, err)
	}
	return nil
}

// NeedLeaderElection is false: see Start.
func (p *Patcher) NeedLeaderElection() bool { return false }

// Patch sets the caBundle of each webhook of both configurations, keyed by name (a strategic
// merge patch).
func (p *Patcher) Patch(ctx context.Context) error {
	validating := p.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	v, err := validating.Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", p.name, err)
	}
	mutating := p.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	m, err := mutating.Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", p.name, err)
	}
	var vNames, mNames []string
	for _, w := range v.Webhooks {
		vNames = append(vNames, w.Name)
	}
	for _, w := range m.Webhooks {
		mNames = append(mNames, w.Name)
	}
	if err := patch(ctx, validating, p.name, vNames, p.ca); err != nil {
		return fmt.Errorf("ValidatingWebhookConfiguration: %w", err)
	}
	if err := patch(ctx, mutating, p.name, mNames, p.ca); err != nil {
		return fmt.Errorf("MutatingWebhookConfiguration: %w", err)
	}
	p.log.Info("webhook caBundle set", "configuration", p.name, "validating", len(vNames), "mutating", len(mNames))
	return nil
}

// patcher is the Patch of either configuration's client.
type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

func patch[T any](ctx context.Context, api patcher[T], name string, webhooks []string, ca []byte) error {
	body, err := json.Marshal(Patch(webhooks, ca))
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if _, err := api.Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch %s: %w", name, err)
	}
	return nil
}

// Patch is the strategic merge patch that sets ca on every named webhook.
func Patch(webhooks []string, ca []byte) map[string]any {
	hooks := make([]map[string]any, 0, len(webhooks))
	for _, name := range webhooks {
		hooks = append(hooks, map[string]any{"name": name, "clientConfig": map[string]any{"caBundle": ca}})
	}
	return map[string]any{"webhooks": hooks}
}

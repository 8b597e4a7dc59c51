// Package cabundle puts the webhook server's CA into the chart's ValidatingWebhookConfiguration
// when virtualization-controller starts. The chart issues the serving certificate into a Secret
// (docs/chart.md) and writes the configuration without a caBundle, since one template cannot
// hand the CA it generated to another; the controller, which mounts the Secret, patches it in.
package cabundle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Patcher sets the caBundle of every webhook of one ValidatingWebhookConfiguration.
type Patcher struct {
	kube kubernetes.Interface
	name string
	ca   []byte
	log  logr.Logger
	poll time.Duration
}

// NewPatcher patches the configuration name with ca.
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

// Patch sets the caBundle of each webhook, keyed by name (a strategic merge patch).
func (p *Patcher) Patch(ctx context.Context) error {
	api := p.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := api.Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %w", p.name, err)
	}
	patch, err := json.Marshal(Patch(cfg, p.ca))
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if _, err := api.Patch(ctx, p.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch %s: %w", p.name, err)
	}
	p.log.Info("webhook caBundle set", "configuration", p.name, "webhooks", len(cfg.Webhooks))
	return nil
}

// Patch is the strategic merge patch that sets ca on every webhook of cfg.
func Patch(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, ca []byte) map[string]any {
	hooks := make([]map[string]any, 0, len(cfg.Webhooks))
	for _, w := range cfg.Webhooks {
		hooks = append(hooks, map[string]any{"name": w.Name, "clientConfig": map[string]any{"caBundle": ca}})
	}
	return map[string]any{"webhooks": hooks}
}

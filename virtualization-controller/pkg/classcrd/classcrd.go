// Package classcrd brings the VirtualMachineClass CRD to Kubernetes' versioning contract when
// virtualization-controller starts: it points the CRD's conversion at the controller's webhook
// (strategy Webhook with the serving CA), then migrates the stored objects to the storage version
// and records that only it is stored (status.storedVersions).
//
// The chart installs the CRD from crds/ (generated, identical to the API module's, never
// templated), so the caBundle, which only the installation knows, is patched in here.
package classcrd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/d8virt/api/core/v1alpha3"
)

// Name is the CRD's name.
const Name = "virtualmachineclasses.virtualization.deckhouse.io"

// StorageVersion is the version objects are stored in.
var StorageVersion = v1alpha3.SchemeGroupVersion.Version

var resource = schema.GroupVersionResource{Group: v1alpha3.SchemeGroupVersion.Group, Version: StorageVersion, Resource: "virtualmachineclasses"}

// Migrator patches the conversion and migrates the stored classes.
type Migrator struct {
	crds    apiextensionsclient.Interface
	dynamic dynamic.Interface
	webhook apiextensionsv1.WebhookClientConfig
	log     logr.Logger
	// poll is how often a step that waits for the apiserver (the webhook reachable) retries.
	poll time.Duration
}

// NewMigrator points the CRD at webhook (its service or URL, path and caBundle).
func NewMigrator(crds apiextensionsclient.Interface, dyn dynamic.Interface, webhook apiextensionsv1.WebhookClientConfig, log logr.Logger, poll time.Duration) *Migrator {
	return &Migrator{crds: crds, dynamic: dyn, webhook: webhook, log: log, poll: poll}
}

// Conversion is the CRD's conversion stanza for webhook.
func Conversion(webhook apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             webhook.DeepCopy(),
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// Start patches the conversion, then migrates, retrying each step until it succeeds or ctx ends
// (the webhook server may still be starting). It implements manager.Runnable.
func (m *Migrator) Start(ctx context.Context) error {
	if err := m.retry(ctx, "patch the conversion", m.PatchConversion); err != nil {
		return fmt.Errorf("VirtualMachineClass conversion: %w", err)
	}
	if err := m.retry(ctx, "migrate the stored objects", m.Migrate); err != nil {
		return fmt.Errorf("VirtualMachineClass storage migration: %w", err)
	}
	return nil
}

// NeedLeaderElection says only the leader migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }

func (m *Migrator) retry(ctx context.Context, what string, step func(context.Context) error) error {
	return wait.PollUntilContextCancel(ctx, m.poll, true, func(ctx context.Context) (bool, error) {
		if err := step(ctx); err != nil {
			m.log.Info("VirtualMachineClass CRD: retrying", "step", what, "error", err.Error())
			return false, nil
		}
		return true, nil
	})
}

// PatchConversion sets the CRD's conversion to the webhook (a merge patch of spec.conversion).
func (m *Migrator) PatchConversion(ctx context.Context) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": Conversion(m.webhook)}})
	if err != nil {
		return fmt.Errorf("encode conversion patch: %w", err)
	}
	if _, err := m.crds.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the conversion of %s: %w", Name, err)
	}
	m.log.Info("VirtualMachineClass CRD: conversion through the webhook")
	return nil
}

// Migrate rewrites every stored class (an update that changes nothing makes the apiserver
// store it in the storage version), then sets status.storedVersions to the storage version.
// Nothing to do when that is all the CRD has stored.
func (m *Migrator) Migrate(ctx context.Context) error {
	crds := m.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %w", Name, err)
	}
	if slices.Equal(crd.Status.StoredVersions, []string{StorageVersion}) {
		return nil
	}
	classes := m.dynamic.Resource(resource)
	list, err := classes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list VirtualMachineClasses: %w", err)
	}
	for _, item := range list.Items {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := classes.Get(ctx, item.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = classes.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("rewrite VirtualMachineClass %s: %w", item.GetName(), err)
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		was := crd.Status.StoredVersions
		crd.Status.StoredVersions = []string{StorageVersion}
		if _, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set storedVersions of %s: %w", Name, err)
		}
		m.log.Info("VirtualMachineClass CRD: stored objects migrated", "count", len(list.Items), "storedVersions", was, "now", crd.Status.StoredVersions)
		return nil
	})
}

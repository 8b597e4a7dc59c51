package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/localnet"
)

func (r *podRuntime) releaseSandbox() {
	r.sandboxReady = false
	if r.state.NetHost != "" {
		if err := r.p.net.DeleteHost(r.state.NetHost); err != nil {
			r.log.Warn("delete network namespace", "err", err)
		}
	}
}

// RequestedIPAnnotation is the Pod annotation whose IPv4 address the pod gets, as Cilium's
// requested-address annotation (which the reference module puts on a VM's launcher Pod): the
// node agent plays the CNI. A malformed address, one outside the local subnet or one another
// host holds fails the sandbox (event FailedCreatePodSandBox), retried with back-off.
const RequestedIPAnnotation = "cni.cilium.io/ipAddress"

// SharePriorityLabel is the reference module's label for Pods that may share a requested address
// (the two Pods of a migrating VM): a Pod with it whose requested address another host holds
// starts with an address of its own, and takes the shared one over when its holder is gone
// (localnet.ClaimShared). The priorities themselves are not compared:
// the holder keeps the address as long as it lives, which is how the two Pods of a migration
// end (the source Pod is deleted once the guest runs on the target).
const SharePriorityLabel = "network.deckhouse.io/pod-common-ip-priority"

// sandboxError is a sandbox failure with the event reason it is reported under.
type sandboxError struct {
	reason string
	err    error
}

func (e *sandboxError) Error() string { return e.err.Error() }
func (e *sandboxError) Unwrap() error { return e.err }

// requestedIP is the address pod asks for, invalid when it asks for none.
func requestedIP(pod *corev1.Pod) (netip.Addr, error) {
	v, ok := pod.Annotations[RequestedIPAnnotation]
	if !ok {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("annotation %s: %q is not an IPv4 address", RequestedIPAnnotation, v)
	}
	return a, nil
}

// NetHostName is the localnet host (network namespace d8v-<name>) of a pod: derived from its UID,
// so it is unique machine-wide; localnet hashes it into interface names that fit Linux's limit.
func NetHostName(uid types.UID) string { return "pod-" + string(uid) }

// setupSandbox creates the pod directory, its network namespace, /etc/hosts, /etc/resolv.conf
// and volumes.
func (r *podRuntime) setupSandbox(ctx context.Context) error {
	pod := r.currentPod()
	l := r.p.layout
	for _, d := range []string{l.PodDir(r.uid), l.LogsDir(r.uid)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := writeJSON(l.PodFile(r.uid), pod); err != nil {
		return err
	}
	if r.state.StartTime == nil {
		now := metav1.Now()
		r.state.StartTime = &now
	}
	if pod.Spec.HostNetwork {
		r.state.PodIP = r.p.hostIP
	} else {
		name := NetHostName(r.uid)
		r.state.NetHost = name
		r.saveState() // before the namespace exists, so a crash leaves nothing untracked
		want, err := requestedIP(pod)
		if err != nil {
			return &sandboxError{reason: "FailedCreatePodSandBox", err: err}
		}
		h, err := r.p.net.AddHostAt(name, want)
		if _, shares := pod.Labels[SharePriorityLabel]; shares && errors.Is(err, localnet.ErrAddrTaken) {
			h, err = r.p.net.AddHost(name)
			r.state.SharedIP = want.String()
		}
		if err != nil {
			return &sandboxError{reason: "FailedCreatePodSandBox", err: fmt.Errorf("network namespace: %w", err)}
		}
		r.state.PodIP = h.IP.String()
	}
	if err := os.WriteFile(l.EtcHosts(r.uid), []byte(etcHosts(pod, r.state.PodIP)), 0o644); err != nil {
		return err
	}
	dns := PodDNS(pod, r.p.cfg.ClusterDNS, r.p.cfg.ClusterDomain, r.p.cfg.NodeDNS)
	if err := os.WriteFile(l.ResolvConf(r.uid), []byte(dns.String()), 0o644); err != nil {
		return err
	}
	automount, err := r.p.automount(ctx, pod)
	if err != nil {
		return err
	}
	r.state.Automount = automount
	vols, _ := EffectiveVolumes(pod, automount)
	paths, refresh, err := PrepareVolumes(ctx, l, pod, vols, r.p.volumeSource(r, pod, r.state.PodIP))
	if err != nil {
		return err
	}
	r.state.Volumes = paths
	r.refreshAt = refresh
	r.resyncAt = time.Now().Add(r.p.cfg.VolumeResync)
	r.saveState()
	return nil
}

// claimShared takes the pod's shared address over once its holder is gone; it reports whether the
// pod holds it now.
func (r *podRuntime) claimShared() bool {
	want, err := netip.ParseAddr(r.state.SharedIP)
	if err != nil {
		r.log.Warn("shared address", "err", err)
		return true
	}
	ok, err := r.p.net.ClaimShared(r.state.NetHost, want)
	if err != nil {
		r.log.Warn("claim the shared address", "address", want, "err", err)
		return false
	}
	if ok {
		r.state.SharedHeld = true
		r.saveState()
		r.log.Info("took the shared address over", "address", want)
		r.event(corev1.EventTypeNormal, "SharedAddressClaimed", "the Pod holds "+want.String()+" now, which it shared with a Pod that is gone")
	}
	return ok
}

// refreshVolumes renews tokens and re-reads configMaps, secrets and downward API values.
func (r *podRuntime) refreshVolumes(ctx context.Context) {
	pod := r.currentPod()
	vols, _ := EffectiveVolumes(pod, r.state.Automount)
	_, refresh, err := PrepareVolumes(ctx, r.p.layout, pod, vols, r.p.volumeSource(r, pod, r.state.PodIP))
	r.resyncAt = time.Now().Add(r.p.cfg.VolumeResync)
	if err != nil {
		r.log.Warn("refresh volumes", "err", err)
		r.refreshAt = time.Now().Add(30 * time.Second)
		return
	}
	r.refreshAt = refresh
}

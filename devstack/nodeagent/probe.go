package nodeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/d8virt/devstack/localnet"
)

// startProbe starts the readiness prober of c's running attempt; without a readiness probe a
// running container is ready.
func (r *podRuntime) startProbe(ctx context.Context, c *ctr, spec *corev1.Container) {
	if c.probeCancel != nil {
		c.probeCancel()
		c.probeCancel = nil
	}
	if spec.ReadinessProbe == nil {
		c.ready = true
		return
	}
	c.ready = false
	pctx, cancel := context.WithCancel(ctx)
	c.probeCancel = cancel
	t := probeTarget{
		podIP: r.state.PodIP, ports: spec.Ports, ctrDir: c.dir, attempt: c.running.Attempt,
	}
	if r.state.NetHost != "" {
		t.netns = &localnet.Host{Name: r.state.NetHost, NetNS: localnet.NetNSPrefix + r.state.NetHost}
	}
	go r.probeLoop(pctx, c, t, spec.ReadinessProbe.DeepCopy())
}

type probeTarget struct {
	podIP   string
	ports   []corev1.ContainerPort
	netns   *localnet.Host
	ctrDir  string
	attempt int
}

func (r *podRuntime) probeLoop(ctx context.Context, c *ctr, t probeTarget, p *corev1.Probe) {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	succThreshold, failThreshold := max(p.SuccessThreshold, 1), max(p.FailureThreshold, 1)
	if p.FailureThreshold == 0 {
		failThreshold = 3
	}
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	ready := false
	succ, fail := int32(0), int32(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = period
		err := runProbe(ctx, t, p, timeout)
		if err == nil {
			succ, fail = succ+1, 0
		} else {
			succ, fail = 0, fail+1
		}
		next := ready
		if err == nil && succ >= succThreshold {
			next = true
		}
		if err != nil && fail >= failThreshold {
			next = false
		}
		if next != ready {
			ready = next
			r.log.Info("readiness changed", "container", c.name, "ready", ready, "err", err)
			attempt := t.attempt
			r.post(func() {
				if c.running != nil && c.running.Attempt == attempt {
					c.ready = ready
				}
			})
		}
	}
}

// runProbe runs one probe inside the pod: exec through nsenter in the container's namespaces,
// TCP and HTTP from a socket opened in the pod's network namespace.
func runProbe(ctx context.Context, t probeTarget, p *corev1.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		var ri RunningInfo
		if err := readJSON(filepath.Join(t.ctrDir, runningFile), &ri); err != nil || ri.Attempt != t.attempt {
			return fmt.Errorf("container process not known yet")
		}
		var spec InitSpec
		if err := readJSON(filepath.Join(t.ctrDir, initFile), &spec); err != nil {
			return err
		}
		args := append([]string{"-t", strconv.Itoa(ri.Pid), "-m", "-u", "-n", "--"}, p.Exec.Command...)
		cmd := exec.CommandContext(ctx, "nsenter", args...)
		cmd.Env = spec.Env
		if !hasEnv(spec.Env, "PATH") {
			cmd.Env = append(cmd.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("exec probe: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, t.ports)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		conn, err := dialIn(ctx, t.netns, net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.HTTPGet != nil:
		g := p.HTTPGet
		port, err := resolvePort(g.Port, t.ports)
		if err != nil {
			return err
		}
		host := g.Host
		if host == "" {
			host = t.podIP
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := g.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path), nil)
		if err != nil {
			return err
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		tr := &http.Transport{
			DialContext:     func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, t.netns, addr) },
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet does not verify probe targets either
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe: %s", resp.Status)
		}
		return nil
	}
	return nil // gRPC probes are not supported: the container counts as ready
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// dialIn opens a TCP connection from inside a network namespace (nil: the host's).
func dialIn(ctx context.Context, ns *localnet.Host, addr string) (net.Conn, error) {
	var d net.Dialer
	if ns == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	var conn net.Conn
	err := ns.Do(func() error {
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

// Package dvcr runs DVCR, the module's registry, as local processes: distribution v3's registry
// twice over one storage directory, as the chart's DVCR pod does. The push
// instance takes only the pusher's credentials; the pull instance is read-only (distribution's
// maintenance mode) and takes only the puller's. TLS on both.
package dvcr

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/htpasswd"
)

// Binary is distribution v3's registry, found on PATH (hack/build-k8s.sh builds it into the
// machine-wide cache's bin directory, which the Makefile puts on PATH).
const Binary = "registry"

// Credentials of one DVCR user.
type Credentials struct{ Username, Password string }

// DockerConfigJSON is the .dockerconfigjson for these credentials at host.
func (c Credentials) DockerConfigJSON(host string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	return b
}

// Options of a local DVCR.
type Options struct {
	// Dir holds the configuration, the credentials and the storage.
	Dir string
	// Cert and Key are the PEM serving certificate for Host.
	Cert, Key []byte
	// Host is the address both instances listen on (an IP).
	Host string
}

// DVCR is a running local DVCR.
type DVCR struct {
	// PushAddr and PullAddr are host:port of the two instances; MetricsAddr the push
	// instance's debug listener (Prometheus at /metrics).
	PushAddr, PullAddr, MetricsAddr string
	Pusher, Puller                  Credentials
	Storage                         string
	pushConfig                      string // the push instance's configuration file
	procs                           []*exec.Cmd
}

// Start writes the configuration and starts both instances; they are ready when it returns.
func Start(ctx context.Context, o Options) (*DVCR, error) {
	d := &DVCR{Storage: filepath.Join(o.Dir, "storage"), Pusher: Credentials{"pusher", secret()}, Puller: Credentials{"puller", secret()}}
	for _, f := range []struct {
		name string
		data []byte
	}{{"tls.crt", o.Cert}, {"tls.key", o.Key}} {
		if err := os.WriteFile(filepath.Join(o.Dir, f.name), f.data, 0o600); err != nil {
			return nil, fmt.Errorf("dvcr: %w", err)
		}
	}
	ports, err := freePorts(o.Host, 4)
	if err != nil {
		return nil, err
	}
	d.PushAddr, d.PullAddr = net.JoinHostPort(o.Host, ports[0]), net.JoinHostPort(o.Host, ports[1])
	d.MetricsAddr = net.JoinHostPort("127.0.0.1", ports[2])
	secret := secret()
	for _, inst := range []struct {
		name, addr, debug string
		user              Credentials
		readonly          bool
	}{
		{"push", d.PushAddr, d.MetricsAddr, d.Pusher, false},
		{"pull", d.PullAddr, net.JoinHostPort("127.0.0.1", ports[3]), d.Puller, true},
	} {
		// The chart's DVCR writes its htpasswd files with the same function (dvcr-htpasswd).
		line, err := htpasswd.Line(inst.user.Username, inst.user.Password)
		if err != nil {
			return nil, fmt.Errorf("dvcr: %w", err)
		}
		htpasswdFile := filepath.Join(o.Dir, inst.name+".htpasswd")
		if err := os.WriteFile(htpasswdFile, []byte(line+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("dvcr: %w", err)
		}
		config := filepath.Join(o.Dir, inst.name+".yaml")
		if !inst.readonly {
			d.pushConfig = config
		}
		if err := os.WriteFile(config, Config(ConfigOptions{
			Addr: inst.addr, DebugAddr: inst.debug, Storage: d.Storage, ReadOnly: inst.readonly, HTTPSecret: secret,
			Htpasswd: htpasswdFile, Cert: filepath.Join(o.Dir, "tls.crt"), Key: filepath.Join(o.Dir, "tls.key"),
		}), 0o600); err != nil {
			return nil, fmt.Errorf("dvcr: %w", err)
		}
		logf, err := os.Create(filepath.Join(o.Dir, inst.name+".log"))
		if err != nil {
			return nil, fmt.Errorf("dvcr: %w", err)
		}
		cmd := exec.Command(Binary, "serve", config)
		// No trace collector here either (the chart sets the same).
		cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			logf.Close()
			d.Stop()
			return nil, fmt.Errorf("dvcr: start %s: %w", Binary, err)
		}
		logf.Close()
		d.procs = append(d.procs, cmd)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(o.Cert)
	if err := d.wait(ctx, pool); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// GarbageCollectScript is the shell script that garbage-collects DVCR's storage (rooted at
// storage, the registry's configuration at config): the blobs and untagged manifests no tag refers
// to. The registry's collection fails on a storage that has no repository yet, so that is left
// alone. The chart's DVCR pod runs it before its registries start (its gc init container, with
// /var/lib/registry and /etc/dvcr/config/push.yaml), and GarbageCollect here.
func GarbageCollectScript(storage, config string) string {
	repos := path.Join(storage, "docker/registry/v2/repositories")
	return fmt.Sprintf(`if [ -d %[1]s ]; then exec %[2]s garbage-collect --delete-untagged %[3]s; fi; echo "nothing to collect: no repository in %[4]s"`,
		repos, Binary, config, storage)
}

// GarbageCollect runs the registry's garbage collection over the storage, as the chart's DVCR pod
// does at its start: only while both instances are stopped (Stop), since a blob pushed but not yet
// tagged would go too. It returns the collection's output.
func (d *DVCR) GarbageCollect(ctx context.Context) (string, error) {
	if len(d.procs) > 0 {
		return "", errors.New("dvcr: garbage collection while the registry runs")
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", GarbageCollectScript(d.Storage, d.pushConfig))
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("dvcr: garbage collection: %w: %s", err, out)
	}
	return string(out), nil
}

// Stop ends both instances.
func (d *DVCR) Stop() {
	for _, c := range d.procs {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	d.procs = nil
}

// wait until both answer /v2/ (401 without credentials is an answer).
func (d *DVCR) wait(ctx context.Context, roots *x509.CertPool) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: time.Second}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, addr := range []string{d.PushAddr, d.PullAddr} {
		for {
			resp, err := client.Get("https://" + addr + "/v2/")
			if err == nil {
				resp.Body.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("dvcr: %s does not answer: %w", addr, errors.Join(ctx.Err(), err))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func secret() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePorts(host string, n int) ([]string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("dvcr: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// PEM encodes a tls.Certificate's leaf and key for the registry's files.
func PEM(c tls.Certificate) (cert, key []byte, err error) {
	kb, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("dvcr: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

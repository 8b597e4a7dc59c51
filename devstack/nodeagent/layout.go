package nodeagent

import (
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Volume plugin directories, named as kubelet names them: tools that look into a node's pod
// directories (virt-handler finds virt-launcher's sockets in an emptyDir) rely on these names.
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginSecret      = "kubernetes.io~secret"
	PluginProjected   = "kubernetes.io~projected"
	PluginDownwardAPI = "kubernetes.io~downward-api"
)

// Layout is the directory tree of one node under its root directory:
//
//	<root>/pods/<pod uid>/pod.json                                   the pod as the agent runs it
//	<root>/pods/<pod uid>/state.json                                 pod IP, start time, outcome
//	<root>/pods/<pod uid>/etc-hosts                                  the pod's /etc/hosts
//	<root>/pods/<pod uid>/resolv.conf                                the pod's /etc/resolv.conf
//	<root>/pods/<pod uid>/volumes/<plugin>/<volume name>/            volume contents, as on a kubelet
//	<root>/pods/<pod uid>/logs/<container>.log                       stdout and stderr, every restart
//	<root>/pods/<pod uid>/containers/<container>/                    per-container state:
//	    init.json  running.json  exit.json  record.json  termination-log  rootfs/<private dirs>
type Layout struct {
	Root string
}

func (l Layout) PodsDir() string                { return filepath.Join(l.Root, "pods") }
func (l Layout) PodDir(uid types.UID) string    { return filepath.Join(l.PodsDir(), string(uid)) }
func (l Layout) PodFile(uid types.UID) string   { return filepath.Join(l.PodDir(uid), "pod.json") }
func (l Layout) StateFile(uid types.UID) string { return filepath.Join(l.PodDir(uid), "state.json") }
func (l Layout) EtcHosts(uid types.UID) string  { return filepath.Join(l.PodDir(uid), "etc-hosts") }
func (l Layout) LogsDir(uid types.UID) string   { return filepath.Join(l.PodDir(uid), "logs") }
func (l Layout) ResolvConf(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), "resolv.conf")
}

// VolumePath is where a volume handled by the given plugin keeps its contents.
func (l Layout) VolumePath(uid types.UID, plugin, volume string) string {
	return filepath.Join(l.PodDir(uid), "volumes", plugin, volume)
}

// EmptyDirPath is an emptyDir volume: <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>.
func (l Layout) EmptyDirPath(uid types.UID, volume string) string {
	return l.VolumePath(uid, PluginEmptyDir, volume)
}

// LogFile receives a container's stdout and stderr, appended across restarts.
func (l Layout) LogFile(uid types.UID, container string) string {
	return filepath.Join(l.LogsDir(uid), container+".log")
}

// ContainerDir holds one container's state files.
func (l Layout) ContainerDir(uid types.UID, container string) string {
	return filepath.Join(l.PodDir(uid), "containers", container)
}

// KubeletDir is the kubelet's root directory as hostPath volumes name it.
const KubeletDir = "/var/lib/kubelet"

// HostPath maps a hostPath volume's path to this machine: the kubelet's directory is the agent's
// root (whose pods/ has the kubelet's layout), every other path is itself.
func (l Layout) HostPath(p string) string {
	p = filepath.Clean(p)
	if rel, err := filepath.Rel(KubeletDir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.Join(l.Root, rel)
	}
	return p
}

// Package node keeps this machine's Node object: it registers it with the host's capacity, addresses and
// software versions, renews its Lease in kube-node-lease (the heartbeat the node lifecycle reads), and
// refreshes its status conditions periodically.
package node

import (
	"context"
	"fmt"
	"net"
	"os"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/pkg/hostmem"
)

// Config describes the node.
type Config struct {
	// Name is the node's name.
	Name string
	// Client writes the Node and its Lease.
	Client kubernetes.Interface
	// KubeletVersion is the Kubernetes version reported in nodeInfo (e.g. "v1.37.2").
	KubeletVersion string
	// RuntimeVersion is the container runtime's, e.g. "containerd://1.6.20".
	RuntimeVersion string
	// KubeletPort is the kubelet API's port (daemonEndpoints.kubeletEndpoint.Port).
	KubeletPort int32
	// InternalIP is the node's address; empty means 127.0.0.1.
	InternalIP string
	// Hostname is the node's Hostname address; empty means this machine's host name.
	Hostname string
	// Labels are added to the standard ones (kubernetes.io/hostname, os, arch).
	Labels map[string]string
	// Taints are set on the Node at registration (one of the same key and effect is replaced; others,
	// such as kubectl taint added, stay).
	Taints []corev1.Taint
	// Capacity overrides the host's (cpu, memory, pods, ephemeral-storage) where set.
	Capacity corev1.ResourceList
	// StatusInterval is how often the status is refreshed (default 10s); LeaseInterval how often the
	// lease is renewed (default 10s); LeaseDurationSeconds its duration (default 40).
	StatusInterval, LeaseInterval time.Duration
	LeaseDurationSeconds          int32
}

// RegisteredAnnotation marks a Node that a rayctl kubelet registered (value "true"): one that a later
// `rayctl up` no longer serves is stale (see RemoveStale).
const RegisteredAnnotation = "rayctl.io/kubelet"

// Agent registers and maintains the Node.
type Agent struct {
	cfg Config

	mu       sync.Mutex
	node     *corev1.Node
	hostname string
}

// New returns an agent; nothing is written until Register.
func New(cfg Config) *Agent {
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 10 * time.Second
	}
	if cfg.LeaseInterval <= 0 {
		cfg.LeaseInterval = 10 * time.Second
	}
	if cfg.LeaseDurationSeconds <= 0 {
		cfg.LeaseDurationSeconds = 40
	}
	if cfg.InternalIP == "" {
		cfg.InternalIP = "127.0.0.1"
	}
	h := cfg.Hostname
	if h == "" {
		h, _ = os.Hostname()
	}
	if h == "" {
		h = cfg.Name
	}
	return &Agent{cfg: cfg, hostname: h}
}

// Capacity returns the node's capacity: the host's cpus, memory (package hostmem), 110 pods and the
// data filesystem's size, overridden by Config.Capacity.
func (a *Agent) Capacity() corev1.ResourceList {
	c := HostCapacity("/")
	for k, v := range a.cfg.Capacity {
		c[k] = v.DeepCopy()
	}
	return c
}

// HostCapacity measures this machine: cpu from the number of CPUs, memory from package hostmem,
// ephemeral-storage from the filesystem holding path, and pods 110.
func HostCapacity(path string) corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	if mem := hostmem.Total(); mem > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var fs unix.Statfs_t
	if unix.Statfs(path, &fs) == nil {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*int64(fs.Bsize), resource.BinarySI)
	}
	return list
}

// Register creates the Node, or updates the one left by an earlier start, and writes its status.
func (a *Agent) Register(ctx context.Context) error {
	client := a.cfg.Client.CoreV1().Nodes()
	labels := map[string]string{
		"kubernetes.io/hostname":  a.cfg.Name,
		"kubernetes.io/os":        goruntime.GOOS,
		"kubernetes.io/arch":      goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	for k, v := range a.cfg.Labels {
		labels[k] = v
	}
	n, err := client.Get(ctx, a.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		n, err = client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Name, Labels: labels,
			Annotations: map[string]string{RegisteredAnnotation: "true"}},
			Spec: corev1.NodeSpec{Taints: a.cfg.Taints}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("registering node %s: %w", a.cfg.Name, err)
		}
	case err != nil:
		return fmt.Errorf("reading node %s: %w", a.cfg.Name, err)
	default:
		changed := false
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			if n.Labels[k] != v {
				n.Labels[k] = v
				changed = true
			}
		}
		if n.Annotations[RegisteredAnnotation] != "true" {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[RegisteredAnnotation] = "true"
			changed = true
		}
		if taints, differ := withTaints(n.Spec.Taints, a.cfg.Taints); differ {
			n.Spec.Taints = taints
			changed = true
		}
		if changed {
			if n, err = client.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating node %s: %w", a.cfg.Name, err)
			}
		}
	}
	a.mu.Lock()
	a.node = n
	a.mu.Unlock()
	return a.updateStatus(ctx)
}

// withTaints returns have with each of want set (replacing one of the same key and effect), and whether
// that changed anything.
func withTaints(have, want []corev1.Taint) ([]corev1.Taint, bool) {
	out := append([]corev1.Taint(nil), have...)
	changed := false
	for _, w := range want {
		found := false
		for i := range out {
			if out[i].Key == w.Key && out[i].Effect == w.Effect {
				found = true
				if out[i].Value != w.Value {
					out[i].Value, changed = w.Value, true
				}
			}
		}
		if !found {
			out, changed = append(out, w), true
		}
	}
	return out, changed
}

// Run renews the lease and refreshes the status until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("node", a.cfg.Name)
	if err := a.renewLease(ctx); err != nil {
		logger.Error(err, "renewing node lease")
	}
	lease := time.NewTicker(a.cfg.LeaseInterval)
	defer lease.Stop()
	status := time.NewTicker(a.cfg.StatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			if err := a.renewLease(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "renewing node lease")
			}
		case <-status.C:
			if err := a.updateStatus(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "updating node status")
			}
		}
	}
}

// updateStatus writes the node's status with fresh heartbeat times, re-reading the Node on conflict.
func (a *Agent) updateStatus(ctx context.Context) error {
	client := a.cfg.Client.CoreV1().Nodes()
	a.mu.Lock()
	n := a.node.DeepCopy()
	a.mu.Unlock()
	for try := 0; ; try++ {
		a.fillStatus(n)
		updated, err := client.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			a.mu.Lock()
			a.node = updated
			a.mu.Unlock()
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsNotFound(err)) || try >= 3 {
			return err
		}
		if apierrors.IsNotFound(err) {
			// Someone deleted the Node: register it again.
			return a.Register(ctx)
		}
		if n, err = client.Get(ctx, a.cfg.Name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
}

func (a *Agent) fillStatus(n *corev1.Node) {
	now := metav1.Now()
	capacity := a.Capacity()
	n.Status.Capacity = capacity
	n.Status.Allocatable = capacity.DeepCopy()
	n.Status.Phase = ""
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: a.cfg.InternalIP},
		{Type: corev1.NodeHostName, Address: a.hostname},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = a.cfg.KubeletPort
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               readTrim("/etc/machine-id"),
		SystemUUID:              readTrim("/sys/class/dmi/id/product_uuid"),
		BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           kernelVersion(),
		OSImage:                 osImage("/etc/os-release"),
		ContainerRuntimeVersion: a.cfg.RuntimeVersion,
		KubeletVersion:          a.cfg.KubeletVersion,
		OperatingSystem:         goruntime.GOOS,
		Architecture:            goruntime.GOARCH,
	}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for _, c := range want {
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		found := false
		for i := range n.Status.Conditions {
			old := &n.Status.Conditions[i]
			if old.Type != c.Type {
				continue
			}
			found = true
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old = c
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, c)
		}
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease.
func (a *Agent) renewLease(ctx context.Context) error {
	leases := a.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Name, Namespace: corev1.NamespaceNodeLease}}
		a.mu.Lock()
		if a.node != nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a.node.Name, UID: a.node.UID}}
		}
		a.mu.Unlock()
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &a.cfg.Name, LeaseDurationSeconds: &a.cfg.LeaseDurationSeconds, RenewTime: &now}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity = &a.cfg.Name
	l.Spec.LeaseDurationSeconds = &a.cfg.LeaseDurationSeconds
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// Node returns the Node as last written.
func (a *Agent) Node() *corev1.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.node == nil {
		return nil
	}
	return a.node.DeepCopy()
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func kernelVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// osImage returns PRETTY_NAME from an os-release file.
func osImage(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return goruntime.GOOS
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			if s, err := strconv.Unquote(v); err == nil {
				return s
			}
			return strings.Trim(v, `"'`)
		}
	}
	return goruntime.GOOS
}

// HostIP returns the address of the interface holding the default route, else 127.0.0.1.
func HostIP() string {
	conn, err := net.Dial("udp", "192.0.2.1:9")
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		return a.IP.String()
	}
	return "127.0.0.1"
}

// ParseCapacity reads capacity overrides such as `rayctl up --node-capacity cpu=8,memory=16Gi` gives
// them: resource names with quantities. A name that is no resource name or a quantity that does not
// parse is an error naming it.
func ParseCapacity(in map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, value := range in {
		if errs := validation.IsQualifiedName(name); len(errs) > 0 {
			return nil, fmt.Errorf("%s=%s: %q is not a resource name: %s", name, value, name, strings.Join(errs, "; "))
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", name, value, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s=%s: a capacity cannot be negative", name, value)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// Overcommits lists, sorted, the resources of advertised that exceed host, each as
// "cpu 8 (the host has 2)".
func Overcommits(host, advertised corev1.ResourceList) []string {
	var out []string
	for name, q := range advertised {
		if have, ok := host[name]; ok && q.Cmp(have) > 0 {
			out = append(out, fmt.Sprintf("%s %s (the host has %s)", name, q.String(), have.String()))
		}
	}
	sort.Strings(out)
	return out
}

// Package devices hands out a node's accelerators to containers as device plugins do: a container
// whose limits ask for nvidia.com/gpu, amd.com/gpu or google.com/tpu gets that many of the node's
// devices, numbered from 0 up to what the node advertises, none given to two running containers at
// once, and the environment variables that make the device's software use exactly those
// (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, TPU_VISIBLE_CHIPS). A node may advertise devices this
// machine lacks (rayctl up --node gpu1:nvidia.com/gpu=1): the container gets the same variables, and
// the allocation says which of its devices are not there, so that the kubelet can tell the user.
package devices

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// kind is what the manager knows of one accelerator resource.
type kind struct {
	// env are the variables set to the devices' indices, comma-separated.
	env []string
	// present reports whether device i is on this machine.
	present func(i int) bool
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// kinds are the accelerator resources handed out, by resource name.
var kinds = map[corev1.ResourceName]kind{
	"nvidia.com/gpu": {env: []string{"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"},
		present: func(i int) bool { return exists("/dev/nvidia" + strconv.Itoa(i)) }},
	"amd.com/gpu": {env: []string{"ROCR_VISIBLE_DEVICES"},
		present: func(int) bool { return exists("/dev/kfd") }},
	"google.com/tpu": {env: []string{"TPU_VISIBLE_CHIPS"},
		present: func(i int) bool { return exists("/dev/accel"+strconv.Itoa(i)) || exists("/dev/vfio/"+strconv.Itoa(i)) }},
}

// owner is a container holding devices.
type owner struct {
	pod       types.UID
	container string
}

// Manager hands out one node's devices.
type Manager struct {
	capacity map[corev1.ResourceName]int

	mu       sync.Mutex
	assigned map[corev1.ResourceName]map[int]owner
}

// New returns the manager of a node with this capacity (its accelerator resources are the devices).
func New(capacity corev1.ResourceList) *Manager {
	m := &Manager{capacity: map[corev1.ResourceName]int{}, assigned: map[corev1.ResourceName]map[int]owner{}}
	for name := range kinds {
		if q, ok := capacity[name]; ok && q.Value() > 0 {
			m.capacity[name] = int(q.Value())
		}
	}
	return m
}

// Allocation is what a container was given.
type Allocation struct {
	// Env are the variables that name the container's devices.
	Env []runtime.EnvVar
	// Missing names, per resource, the devices given that this machine does not have, e.g.
	// "nvidia.com/gpu 0".
	Missing []string
}

// Allocate gives container of pod the devices its limits ask for, the same ones again when it had
// them already (a restart). It fails when the node has too few free.
func (m *Manager) Allocate(pod types.UID, container string, limits corev1.ResourceList) (Allocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out Allocation
	names := make([]string, 0, len(kinds))
	for name := range kinds {
		names = append(names, string(name))
	}
	sort.Strings(names)
	me := owner{pod, container}
	for _, n := range names {
		name := corev1.ResourceName(n)
		q, ok := limits[name]
		if !ok || q.Value() <= 0 {
			continue
		}
		want := int(q.Value())
		held := m.assigned[name]
		if held == nil {
			held = map[int]owner{}
			m.assigned[name] = held
		}
		var mine []int
		for i := 0; i < m.capacity[name]; i++ {
			if held[i] == me {
				mine = append(mine, i)
			}
		}
		for i := 0; i < m.capacity[name] && len(mine) < want; i++ {
			if _, taken := held[i]; !taken {
				held[i] = me
				mine = append(mine, i)
			}
		}
		if len(mine) < want {
			for _, i := range mine {
				delete(held, i)
			}
			return Allocation{}, fmt.Errorf("%d %s asked for, %d of the node's %d free", want, name, len(mine), m.capacity[name])
		}
		sort.Ints(mine)
		ids := make([]string, len(mine))
		for j, i := range mine {
			ids[j] = strconv.Itoa(i)
			if !kinds[name].present(i) {
				out.Missing = append(out.Missing, fmt.Sprintf("%s %d", name, i))
			}
		}
		for _, v := range kinds[name].env {
			out.Env = append(out.Env, runtime.EnvVar{Name: v, Value: strings.Join(ids, ",")})
		}
	}
	return out, nil
}

// Release frees every device of pod's containers.
func (m *Manager) Release(pod types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, held := range m.assigned {
		for i, o := range held {
			if o.pod == pod {
				delete(held, i)
			}
		}
	}
}

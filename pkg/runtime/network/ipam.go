package network

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// ipam hands out the pod CIDR's addresses, one per pod UID, and keeps the
// allocations in a JSON file so they survive restarts. A file lock makes two
// processes sharing the state dir safe.
type ipam struct {
	path    string
	subnet  *net.IPNet
	gateway net.IP
}

// ipamState is the file's content.
type ipamState struct {
	// Allocations maps pod UID to IP.
	Allocations map[string]string `json:"allocations"`
	// Last is the last address handed out; the next search starts after it so
	// a released address is not reused at once.
	Last string `json:"last,omitempty"`
}

func ip4ToInt(ip net.IP) uint32 { return binary.BigEndian.Uint32(ip.To4()) }

func intToIP4(n uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, n)
	return ip
}

// update runs fn on the state under an exclusive lock and saves it if fn
// says it changed.
func (a *ipam) update(fn func(*ipamState) (bool, error)) error {
	lock, err := os.OpenFile(a.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	st, err := a.load()
	if err != nil {
		return err
	}
	changed, err := fn(st)
	if err != nil || !changed {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.path)
}

func (a *ipam) load() (*ipamState, error) {
	st := &ipamState{Allocations: map[string]string{}}
	b, err := os.ReadFile(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", a.path, err)
	}
	if st.Allocations == nil {
		st.Allocations = map[string]string{}
	}
	return st, nil
}

// allocate returns the pod's IP, allocating one if it has none.
func (a *ipam) allocate(podUID string) (net.IP, error) {
	var ip net.IP
	err := a.update(func(st *ipamState) (bool, error) {
		if s, ok := st.Allocations[podUID]; ok {
			ip = net.ParseIP(s).To4()
			return false, nil
		}
		used := map[uint32]bool{}
		for _, s := range st.Allocations {
			if p := net.ParseIP(s); p != nil && p.To4() != nil {
				used[ip4ToInt(p)] = true
			}
		}
		ones, bits := a.subnet.Mask.Size()
		size := uint32(1) << uint(bits-ones)
		base := ip4ToInt(a.subnet.IP)
		gw := ip4ToInt(a.gateway)
		start := uint32(0)
		if p := net.ParseIP(st.Last); p != nil && a.subnet.Contains(p) {
			start = ip4ToInt(p) - base
		}
		for i := uint32(1); i <= size; i++ {
			off := (start + i) % size
			cand := base + off
			if off == 0 || off == size-1 || cand == gw || used[cand] {
				continue
			}
			ip = intToIP4(cand)
			st.Allocations[podUID] = ip.String()
			st.Last = ip.String()
			return true, nil
		}
		return false, fmt.Errorf("pod network %s is full (%d pods)", a.subnet, len(st.Allocations))
	})
	return ip, err
}

// lookup returns the pod's IP, or nil.
func (a *ipam) lookup(podUID string) (net.IP, error) {
	st, err := a.load()
	if err != nil {
		return nil, err
	}
	if s, ok := st.Allocations[podUID]; ok {
		return net.ParseIP(s).To4(), nil
	}
	return nil, nil
}

// release frees the pod's IP; releasing an unknown pod is not an error.
func (a *ipam) release(podUID string) error {
	return a.update(func(st *ipamState) (bool, error) {
		if _, ok := st.Allocations[podUID]; !ok {
			return false, nil
		}
		delete(st.Allocations, podUID)
		return true, nil
	})
}

// pods lists the pod UIDs holding an IP, sorted.
func (a *ipam) pods() ([]string, error) {
	st, err := a.load()
	if err != nil {
		return nil, err
	}
	uids := make([]string, 0, len(st.Allocations))
	for uid := range st.Allocations {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	return uids, nil
}

func newIPAM(dir string, subnet *net.IPNet, gateway net.IP) *ipam {
	return &ipam{path: filepath.Join(dir, "ipam.json"), subnet: subnet, gateway: gateway}
}

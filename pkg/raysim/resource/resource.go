// Package resource holds the resource arithmetic raysim shares between the
// GCS node table and the job scheduler: a resource set maps a name ("CPU",
// "GPU", "memory", custom names) to a quantity.
package resource

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Well-known resource names, spelled the way Ray spells them.
const (
	CPU    = "CPU"
	GPU    = "GPU"
	Memory = "memory"
	// ObjectStoreMemory is the object store's size in bytes. raysim has no object store; it reports
	// the resource as Ray does, for accounting only.
	ObjectStoreMemory = "object_store_memory"
)

// epsilon absorbs float rounding when fractional quantities are added and
// subtracted repeatedly.
const epsilon = 1e-9

// Set is a bag of named quantities. A nil Set is empty and usable.
type Set map[string]float64

// Clone returns a copy of s that shares nothing with it.
func (s Set) Clone() Set {
	out := make(Set, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

// Add adds every quantity of o to s, in place, and returns s.
func (s Set) Add(o Set) Set {
	for k, v := range o {
		s[k] += v
	}
	return s
}

// Sub subtracts every quantity of o from s, in place, and returns s.
// Quantities that reach zero are kept (a node with 0 CPU free still has CPU).
func (s Set) Sub(o Set) Set {
	for k, v := range o {
		r := s[k] - v
		if math.Abs(r) < epsilon {
			r = 0
		}
		s[k] = r
	}
	return s
}

// Fits reports whether every positive quantity asked for in req is available in s.
func (s Set) Fits(req Set) bool {
	for k, v := range req {
		if v <= 0 {
			continue
		}
		if s[k]+epsilon < v {
			return false
		}
	}
	return true
}

// IsZero reports whether s asks for nothing (no positive quantity).
func (s Set) IsZero() bool {
	for _, v := range s {
		if v > 0 {
			return false
		}
	}
	return true
}

// Names returns the resource names of s, sorted with CPU, GPU and memory first.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, k)
	}
	rank := func(n string) int {
		switch n {
		case CPU:
			return 0
		case GPU:
			return 1
		case Memory:
			return 2
		}
		return 3
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// String renders s as "CPU=2 GPU=0 memory=1073741824", in Names order.
func (s Set) String() string {
	parts := make([]string, 0, len(s))
	for _, n := range s.Names() {
		parts = append(parts, fmt.Sprintf("%s=%s", n, FormatQuantity(s[n])))
	}
	return strings.Join(parts, " ")
}

// FormatQuantity prints a quantity without a trailing ".0" for whole numbers.
func FormatQuantity(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%g", v)
}

// FormatBytes prints a byte count the way `ray status` does for memory (B, KiB, MiB, GiB…).
func FormatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

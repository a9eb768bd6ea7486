// Package rayports gives each Ray pod of a node whose pods share the host's network (`rayctl up
// --pod-network=host`: macOS, or Linux without user namespaces) a block of ports of its own on the
// host's loopback, as Ray's own multi-node test clusters on one machine do: without it a head and a
// worker (and any two clusters) would all claim 6379, 8265, 8080 … on the one network they share.
//
// A block is Size consecutive ports from First on; each of Ray's listeners has a fixed offset in it
// (Role). The RayCluster controller takes a block per pod (Allocator), writes the ports into the pod's
// `ray start`, container ports and environment, and the head's into its Service's target ports, so
// that the Service, its endpoints, the cluster's status.endpoints and `kubectl port-forward svc/…`
// carry them.
package rayports

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Role is one of Ray's listeners, by its offset in a Block.
type Role int32

// Ray's listeners that have a port flag of `ray start`, in their order within a Block.
const (
	GCS Role = iota
	Dashboard
	Client
	Metrics
	AgentListen
	AgentGRPC
	NodeManager
	ObjectManager
	RuntimeEnvAgent
	Serve
	roles
)

// Block layout.
const (
	// First is the first port of the first block: above Ray's default worker ports (10002–19999) and
	// below Linux's ephemeral range (32768–60999).
	First = 20000
	// Size is the ports of one block.
	Size = 10
	// Count is how many blocks there are (ports 20000–29999).
	Count = 1000
)

// Annotation records a pod's block (and, on a head Service, its head's), as the block's first port.
const Annotation = "rayctl.dev/ray-ports"

// Block is a run of Size ports, named by its first.
type Block int32

// Port is role's port in the block.
func (b Block) Port(r Role) int32 { return int32(b) + int32(r) }

// String is the block's first port, as Annotation holds it.
func (b Block) String() string { return strconv.Itoa(int(b)) }

// Parse reads a block from an Annotation value.
func Parse(s string) (Block, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < First || n >= First+Size*Count || (n-First)%Size != 0 {
		return 0, false
	}
	return Block(n), true
}

// FromAnnotations is the block an object's annotations record, if any.
func FromAnnotations(a map[string]string) (Block, bool) {
	v, ok := a[Annotation]
	if !ok {
		return 0, false
	}
	return Parse(v)
}

// Params are the `ray start` flags that put a Ray node on its block, on the host's loopback only: its
// own listeners in own, the GCS in head's (the head's own GCS port, or the one a worker joins), and
// workers' ports chosen by the system (Ray's default range is shared by every node on the host).
func Params(own, head Block, isHead bool) map[string]string {
	p := map[string]string{
		"node-ip-address":             "127.0.0.1",
		"metrics-export-port":         itoa(own.Port(Metrics)),
		"dashboard-agent-listen-port": itoa(own.Port(AgentListen)),
		"dashboard-agent-grpc-port":   itoa(own.Port(AgentGRPC)),
		"node-manager-port":           itoa(own.Port(NodeManager)),
		"object-manager-port":         itoa(own.Port(ObjectManager)),
		"runtime-env-agent-port":      itoa(own.Port(RuntimeEnvAgent)),
		"min-worker-port":             "0",
		"max-worker-port":             "0",
	}
	if isHead {
		p["port"] = itoa(head.Port(GCS))
		p["dashboard-host"] = "127.0.0.1"
		p["dashboard-port"] = itoa(own.Port(Dashboard))
		p["ray-client-server-port"] = itoa(own.Port(Client))
	} else {
		p["address"] = HeadAddress(head)
	}
	return p
}

// HeadAddress is where a Ray node on the host reaches the GCS of the head on block head.
func HeadAddress(head Block) string {
	return net.JoinHostPort("127.0.0.1", itoa(head.Port(GCS)))
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// hold is how long a block handed out stays taken without a pod or Service that records it in the
// caller's view (an informer cache catches up in far less).
const hold = 2 * time.Minute

// ErrExhausted says every block is taken.
var ErrExhausted = errors.New("rayports: every block of Ray ports on the host is taken")

// Allocator hands out blocks. It is safe for concurrent use.
type Allocator struct {
	mu    sync.Mutex
	given map[Block]time.Time
	heads map[string]Block
	// Free reports whether nothing on the host listens on port (default: a bind on 127.0.0.1
	// succeeds, which a listener on the wildcard address also refuses).
	Free func(port int32) bool
	now  func() time.Time
}

// NewAllocator returns an Allocator that probes the host's ports.
func NewAllocator() *Allocator {
	return &Allocator{given: map[Block]time.Time{}, heads: map[string]Block{}, Free: portFree, now: time.Now}
}

// Take returns the lowest block that inUse does not hold, that was not handed out within the last two
// minutes, and whose every port is free on the host.
func (a *Allocator) Take(inUse map[Block]bool) (Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.take(inUse)
}

func (a *Allocator) take(inUse map[Block]bool) (Block, error) {
	now := a.now()
	for b, at := range a.given {
		if now.Sub(at) > hold {
			delete(a.given, b)
		}
	}
	for i := range Count {
		b := Block(First + i*Size)
		if inUse[b] {
			continue
		}
		if _, ok := a.given[b]; ok {
			continue
		}
		if !a.allFree(b) {
			continue
		}
		a.given[b] = now
		return b, nil
	}
	return 0, ErrExhausted
}

// Head returns the block of the head of the cluster key: recorded (what the head's Service records),
// else the one handed out for it before, else a new one (Take with inUse's blocks).
func (a *Allocator) Head(key string, recorded *Block, inUse func() (map[Block]bool, error)) (Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if recorded != nil {
		a.heads[key] = *recorded
		return *recorded, nil
	}
	if b, ok := a.heads[key]; ok {
		return b, nil
	}
	used, err := inUse()
	if err != nil {
		return 0, err
	}
	b, err := a.take(used)
	if err != nil {
		return 0, err
	}
	a.heads[key] = b
	return b, nil
}

// Forget drops what the allocator remembers of the head of the cluster key (the cluster is gone).
func (a *Allocator) Forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.heads, key)
}

func (a *Allocator) allFree(b Block) bool {
	for r := range roles {
		if !a.Free(b.Port(r)) {
			return false
		}
	}
	return true
}

// portFree reports whether port can be bound on the host's loopback (Linux and macOS refuse that too
// while a program holds the port on the wildcard address).
func portFree(port int32) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// Describe names a block for messages: "ports 20000–20009".
func Describe(b Block) string { return fmt.Sprintf("ports %d–%d", b, int32(b)+Size-1) }

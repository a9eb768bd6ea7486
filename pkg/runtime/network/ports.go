package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// checkHostPorts refuses a sandbox on the host's network that declares a port another pod's sandbox on
// the host's network declares, or that a program on the host listens on, naming the port and its holder.
// Such pods would otherwise start and fail half-way, when their program finds its port taken (a Ray
// worker's metrics port 8080 beside its head's). A pod whose sandbox is recorded already (kubelet
// re-adopting it) is not checked again: the listener it would find is its own.
func (m *Manager) checkHostPorts(cfg runtime.SandboxConfig) error {
	if len(cfg.Ports) == 0 {
		return nil
	}
	if _, err := m.Sandbox(cfg.PodUID); err == nil {
		return nil
	}
	others, err := m.ListSandboxes()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	why := "pods share the host's network here"
	if m.cfg.HostOnly {
		why += " (the process runtime without root, or off Linux)"
	}
	for _, p := range cfg.Ports {
		for _, o := range others {
			if o.PodUID == cfg.PodUID || !(o.Config.HostNetwork || m.cfg.HostOnly) {
				continue
			}
			if held, ok := declares(o.Config.Ports, p); ok {
				return fmt.Errorf("%w: %s is declared by pod %s/%s (container %s): %s, so two pods cannot declare one port",
					runtime.ErrPortHeld, describePort(p), o.Config.Namespace, o.Config.Name, held.Container, why)
			}
		}
		if err := probePort(p); err != nil {
			return fmt.Errorf("%w: %s is in use on this host by a program outside rayctl's pods (%v): %s",
				runtime.ErrPortHeld, describePort(p), err, why)
		}
	}
	return nil
}

// declares returns the port of ports that is p's port and protocol.
func declares(ports []runtime.Port, p runtime.Port) (runtime.Port, bool) {
	for _, q := range ports {
		if q.Port == p.Port && protocol(q) == protocol(p) {
			return q, true
		}
	}
	return runtime.Port{}, false
}

// protocol is a port's protocol, TCP when unset.
func protocol(p runtime.Port) string {
	if p.Protocol == "" {
		return "TCP"
	}
	return strings.ToUpper(p.Protocol)
}

// describePort names a declared port for a message: "port 8080/TCP (metrics, container ray-worker)".
func describePort(p runtime.Port) string {
	s := fmt.Sprintf("port %d/%s (", p.Port, protocol(p))
	if p.Name != "" {
		s += p.Name + ", "
	}
	return s + "container " + p.Container + ")"
}

// probePort tries to bind p on every address, as a pod's program would; an error means it is taken.
// SCTP is not probed.
func probePort(p runtime.Port) error {
	addr := ":" + strconv.Itoa(int(p.Port))
	switch protocol(p) {
	case "TCP":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		return l.Close()
	case "UDP":
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return nil
}

package controlplane

import (
	"fmt"
	"net"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/runtime/network/egress"
)

// startEgress is the "egress" step: where pods have a network of their own, their way out of the node
// namespace (slirp4netns), or the closed door --pod-egress=off asks for; where they share the host's
// network, the host's own way out.
func (cp *ControlPlane) startEgress() (string, error) {
	m := cp.rt.Network
	if m == nil || m.Gateway() == nil {
		if cp.cfg.PodEgress == egress.Off {
			return "", fmt.Errorf("--pod-egress=off needs pods in a network of their own, and here they share the host's (%s runtime, sandbox %s)",
				cp.rt.Name, cp.sandbox.Mode)
		}
		return "the host's own: pods share its network", nil
	}
	_, services, err := net.ParseCIDR(apiserver.DefaultServiceCIDR)
	if err != nil {
		return "", err
	}
	logger := cp.logger.Named("egress")
	e, err := egress.Start(egress.Config{
		Mode: cp.cfg.PodEgress, NodeNSPath: m.NodeNSPath(), Bridge: m.Config().Bridge, Subnet: m.Subnet(),
		ServiceCIDR: services, LogPath: cp.dir.Join("slirp4netns.log"),
		Logf: func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			fmt.Fprintf(cp.out, "egress: %s\n", msg)
			logger.Warn(msg)
		},
	})
	if err != nil {
		return "", err
	}
	cp.egress = e
	return e.Line(), nil
}

// podsOffline says whether pods have a network of their own and no way out of it: the cluster DNS then
// forwards nothing, and the controllers say so where a Ray job fails for it.
func (cp *ControlPlane) podsOffline() bool {
	return cp.egress != nil && !cp.egress.On()
}

// stopEgress stops pods' way out (the node namespace's rules stay for the next start).
func (cp *ControlPlane) stopEgress() {
	if cp.egress == nil {
		return
	}
	if err := cp.egress.Close(); err != nil {
		cp.logger.Warn("stopping egress", zap.Error(err))
	}
	cp.egress = nil
}

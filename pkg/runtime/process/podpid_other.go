//go:build !linux

package process

// startPodPIDNS has nothing to start: containers share the host's processes here.
func (r *Runtime) startPodPIDNS(string) error { return nil }

// podPIDNS is always "": there are no PID namespaces here.
func (r *Runtime) podPIDNS(string) (string, error) { return "", nil }

// stopPodPIDNS has nothing to stop here.
func (r *Runtime) stopPodPIDNS(string) error { return nil }

// killPodPIDNSs has nothing to kill here.
func (r *Runtime) killPodPIDNSs() {}

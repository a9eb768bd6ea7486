package main

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
)

// A port taken between its pick and the peer's bind is reported as errPortTaken, which peerStart
// answers with a fresh start on fresh ports. Needs Debian's etcd and `make peer-apiserver`.
func TestPeerRunSaysWhenAPortIsTaken(t *testing.T) {
	kubes, _ := filepath.Glob("../_output/tools/kube-apiserver-*")
	etcd, err := exec.LookPath("etcd")
	if err != nil || len(kubes) == 0 {
		t.Skip("needs etcd and _output/tools/kube-apiserver-* (make peer-apiserver)")
	}
	dir := t.TempDir()
	keys, err := newPeerPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	ports := []int{taken.Addr().(*net.TCPAddr).Port, free[0], free[1]} // etcd's client port is taken
	if _, err := peerRun(dir, peerPaths{etcd: etcd, kubeAPIServer: kubes[0]}, keys, ports); !errors.Is(err, errPortTaken) {
		t.Fatalf("peerRun on a taken port: %v, want errPortTaken", err)
	}
}

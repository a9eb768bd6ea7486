//go:build linux

package netpolicy

func openWriter(nsPath string) (writer, error) { return OpenTable(nsPath) }

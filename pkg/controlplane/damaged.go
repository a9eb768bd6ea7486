package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/datadir"
)

// damaged adds what to do to an error about damaged data in dir (etcd's DamagedError, pki's
// BrokenCAError): `rayctl up` refuses such a data dir rather than start on it or with an empty store in
// its place. Other errors pass unchanged.
func damaged(dir *datadir.Dir, err error) error {
	var store *etcd.DamagedError
	var ca *pki.BrokenCAError
	switch {
	case errors.As(err, &store):
		return fmt.Errorf("refusing to start: etcd cannot use its data: %s: %s\n"+
			"rayctl will not start on it, nor with an empty store in its place. To go on, either:\n"+
			"  - restore %s from a backup of the data dir, then run rayctl up again; or\n"+
			"  - start afresh, deleting every stored object: rayctl down --delete-data --data-dir %s",
			store.Path, store.Problem, dir.Join("etcd"), dir.Path)
	case errors.As(err, &ca):
		return fmt.Errorf("refusing to start: %v\n"+
			"A new CA in its place would change every identity of the data dir. To go on, either:\n"+
			"  - restore %s from a backup of the data dir, then run rayctl up again; or\n"+
			"  - move %s away: rayctl up then makes a new CA (stored objects are kept; kubeconfigs and certificates made with the old CA stop working); or\n"+
			"  - start afresh, deleting every stored object: rayctl down --delete-data --data-dir %s",
			ca, ca.Dir, ca.Dir, dir.Path)
	}
	return err
}

// etcdFatal is etcd's Config.Fatal for `rayctl up`: etcd met an error it cannot go on from (a full
// disk, damaged data); say so on w with what to do, and exit.
func etcdFatal(dir *datadir.Dir, w io.Writer) func(msg string) {
	return func(msg string) {
		if strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error()) {
			fmt.Fprintf(w, "rayctl up: etcd stopped: %s\n"+
				"The disk holding %s is full. Free space there, then run rayctl up again: the objects stored so far are kept "+
				"(every write etcd acknowledged is in its write-ahead log).\n", msg, dir.Path)
		} else {
			fmt.Fprintf(w, "rayctl up: etcd stopped: %s\n"+
				"If the disk holding %s is full, free space and run rayctl up again. If etcd's data is damaged, restore %s from a "+
				"backup, or start afresh (deleting every stored object): rayctl down --delete-data --data-dir %s\n",
				msg, dir.Path, dir.Join("etcd"), dir.Path)
		}
		os.Exit(1)
	}
}

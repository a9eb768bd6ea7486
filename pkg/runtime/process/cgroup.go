package process

import "errors"

// errNoCgroups says limits cannot be applied here: containers then run
// without them, and their status message says so.
var errNoCgroups = errors.New("resource limits are not applied: the process runtime needs cgroup v1 memory and cpu controllers (cgroup v2 is not supported yet)")

// Package selfpages gives back the resident pages of the running binary's own code and read-only data.
// rayctl is one large binary: starting up touches tens of MB of it, which RSS then counts although the
// process runs a few MB of it afterwards. The control plane drops them when quiet; the process runtime's
// container init and pod PID-namespace holder (the same binary re-executed) drop them once set up.
package selfpages

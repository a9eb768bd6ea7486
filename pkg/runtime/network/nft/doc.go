// Package nft programs nftables in a network namespace (rayctl's node namespace): a lasting
// connection whose socket lives there (Open), a table replaced whole in one transaction
// (ReplaceTable), and the few expressions rayctl's rules are made of (interface names, addresses,
// ports, connection state, verdicts, NAT). Each user of the node namespace owns one table of its
// own (egress, Services, NetworkPolicy), so none rewrites another's rules.
//
// It is Linux-only (nftables is); elsewhere the package is empty and pods share the host's network.
package nft

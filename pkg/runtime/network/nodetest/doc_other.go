//go:build !linux

// Package nodetest gives node-namespace tests a node of their own; it is Linux-only.
package nodetest

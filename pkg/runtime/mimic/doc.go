// Package mimic covers a directory, in a private mount namespace, with a
// tmpfs that shows what the directory showed: each entry is bound back in
// place (symbolic links copied), so that what is made in the directory
// afterwards lands on the tmpfs and the directory below is never written.
// Linux only.
package mimic

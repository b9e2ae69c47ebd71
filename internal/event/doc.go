// Package event defines the one event model every sysray consumer reads, and
// the tables that decode syscalls, errors, flags and addresses.
package event

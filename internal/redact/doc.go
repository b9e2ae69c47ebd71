// Package redact hides credentials that programs carry in their command
// lines (--password=…, TOKEN=…, a URL's user:password) before sysray shows,
// stores or serves them.
//
// Every command line reaches sysray from a few places: the kernel's exec
// events, /proc/PID/cmdline, a capture's header and events, an strace log.
// Each of those calls Argv, so everything downstream (findings, JSON, the
// HTML report, captures, the agent's API) holds only redacted values. A
// user debugging on their own machine may keep them (--keep-secrets): Keep
// turns redaction off for the whole process.
package redact

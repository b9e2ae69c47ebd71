// Package symbol turns the instruction addresses of BPF stack traces into
// function names for flame graphs and reports.
//
// Kernel addresses resolve against /proc/kallsyms, read once (LoadKernel).
// User addresses resolve per process (Resolver): the process's executable
// mappings are read from /proc/PID/maps, each address becomes an offset in the
// mapped file and then an ELF virtual address, and that address is looked up
// in the file's symbols. Symbols come from the first source that has them:
// .symtab, .gopclntab (stripped Go programs), .gnu_debugdata (MiniDebugInfo),
// a separate debug file (build-id or .gnu_debuglink), and always .dynsym.
// JIT code resolves through perf map files (/tmp/perf-PID.map).
//
// Stacks are usually symbolized after the fact, when short-lived processes
// have gone and their /proc entries with them, so Resolver.Snapshot records a
// process's mappings and keeps its files open until their symbols are read;
// Resolver.Follow does so for a changing set of processes (those a profile
// has sampled) as they appear.
// Files are opened through /proc/PID/map_files and /proc/PID/root so that
// programs in containers resolve against their own binaries, not the host's.
//
// Parsed symbol tables are shared by every process that maps the same file
// (same inode or same build-id): a host with a thousand processes reads libc
// once. Memory is bounded: the least recently used tables are dropped and read
// again if needed.
package symbol

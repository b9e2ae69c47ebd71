package variants

import "slices"

// All is every variant, grouped by detector, one file a detector. Each
// group changes, one at a time or together, what its mechanism does not
// depend on.
var All = slices.Concat(
	hotspotVariants,
	hotVariants,
	growthVariants,
	vsyscallVariants,
	fatalVariants,
	oomVariants,
	execVariants,
	retryVariants,
	slowVariants,
	errorVariants,
	auditVariants,
	refusedVariants,
	cgroupVariants,
	fdVariants,
	inotifyVariants,
	portVariants,
	addrInUseVariants,
	textBusyVariants,
	rofsVariants,
	blockedIOVariants,
	mmapLockVariants,
	mapCountVariants,
	memlockVariants,
	nagleVariants,
	resolverVariants,
	nxdomainVariants,
	lockConvoyVariants,
	thrashVariants,
	cpuWaitVariants,
	connectVariants,
	compactionVariants,
)

package cpudev

const sysMemfdCreate uintptr = 319

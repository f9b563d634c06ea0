package cpudev

const sysMemfdCreate uintptr = 279

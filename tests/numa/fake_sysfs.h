/* A fake sysfs tree describing a four-node machine, built in a temp dir.
 *
 * Nodes: node0 cpus 0-3,8-11; node1 4-7,12-15; node2 16,70; node3 none
 * (memory only). Block devices (dev/block entries, as the kernel lays them
 * out: symlinks into devices/ along the PCI path):
 *   259:0 nvme0n1    PCI 0000:00:1d.0 (node 0)      259:1 nvme0n1p1 (partition)
 *   259:2 nvme1n1    PCI 0000:3b:00.0 (node 1; numa_node two levels up,
 *                    the controller nvme1 has none)  259:3 nvme1n1p1
 *   259:4 nvme2n1    PCI 0000:af:00.0 (node 3)
 *   259:5 nvme3n1    PCI 0000:3c:00.0 (node 1)
 *   259:9 nvme4n1    multipath head under virtual nvme-subsystem, one path
 *                    nvme4c4n1 on PCI 0000:af:00.0 (node 3)
 *   8:0   sda        SATA behind PCI 0000:00:17.0 (node 2), deep SCSI path
 *   254:0 vda        virtio on PCI 0000:00:02.0, numa_node -1
 *   7:0   loop0      virtual, no numa_node anywhere
 *   253:0 dm-0       slaves nvme1n1p1 + nvme3n1 (both node 1)
 *   253:1 dm-1       slaves nvme1n1 (1) + nvme2n1 (3): mixed
 *   253:2 dm-2       slaves nvme0n1 (0) + loop0 (unknown)
 *   253:9 dm-9       slaves/dm-9 -> itself (a loop)
 *   9:0   md0        slaves dm-0 (stacked: node 1)
 * PCI bus links: bus/pci/devices/{0000:3b:00.0,0000:00:02.0,0000:00:1d.0,0000:af:00.0}.
 */
#ifndef PINIO_TESTS_FAKE_SYSFS_H
#define PINIO_TESTS_FAKE_SYSFS_H

#include <stddef.h>

/** Builds the tree; returns its root (static buffer) or NULL. */
const char *fake_sysfs_build(void);

/** Adds dev/block/MAJ:MIN -> a disk on PCI function `pci` with numa_node `node`. */
int fake_sysfs_add_disk(const char *root, unsigned major, unsigned minor, const char *pci,
                        int node);

/** Writes `content` to root/rel, creating parent directories. */
int fake_sysfs_write(const char *root, const char *rel, const char *content);

/** Removes the whole tree. */
void fake_sysfs_remove(const char *root);

#endif

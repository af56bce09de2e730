#!/bin/sh
# What an imaged host shows the controller (racklift.pipeline.image_plan.parse_check reads it in
# this order): its boot id, the deploy nonce the ramdisk or the installer wrote on its disk (an
# empty line where there is none: an older disk), and the image marker. Run with `sh -s` over the
# direct SSH path, or by playbooks/image_check.yml for hosts Ansible reaches another way.
cat /proc/sys/kernel/random/boot_id
printf '%s\n' "$(tr -d '\n' < /etc/racklift/deploy-nonce)"
cat /etc/racklift/image.json

#!/bin/sh
# Regenerates the pictures of docs/layouts.md (needs clayout[plot]):
#   sh docs/img/make.sh
set -e
cd "$(dirname "$0")"
show() { python -m runtime show "$1" --dims "$2" -o "$1.png"; }
show in_out_channel 1,6,3,5
show in_out_height 1,3,5,2
show in_out_width 1,3,2,5
show conv2d_filter 6,3,2,2
show dw_conv2d_filter 2,6,2,2
show argument 6
show weight_height 6,3,2,2
show weight_width 6,3,2,2
show image_2d_weights_c4_fyx_b 3,5,1,2
show image_2d_weights_c1_b_fyx 3,2,2,2
show texture_2d 1,6,3,5

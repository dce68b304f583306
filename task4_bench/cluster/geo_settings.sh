# The geographic settings of geo_spread.sh and leave_and_join.sh, sourced by both: the rate per
# node and the one-way delay, as emulated_cluster reads them.
#   link_of SETTING   prints "RATE DELAY" (lan, continent, world); fails for any other name
link_of() {
  case $1 in
    lan) echo "1gbit 0.1ms" ;;
    continent) echo "100mbit 20ms" ;;
    world) echo "50mbit 100ms" ;;
    *) return 1 ;;
  esac
}

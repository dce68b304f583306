"""distlm: N bare-metal nodes (4 by default) on one experiment LAN, each with the course
repository cloned to /local/distlm, its Debian packages installed and the reference programs
built. node0 (10.10.1.1) is the master; node R has 10.10.1.(R+1).

Instructions:

Wait until the experiment is ready, then log in to a node and read the set-up log:
`tail -f /local/logs/distlm-setup.log`. Its last line is `distlm: ready` (or `distlm: FAILED
at STEP, see LOG`); the first boot takes a while (packages, then the Bazel build). The checkout
is /local/distlm; the handout's cluster commands use --master_ip=10.10.1.1.
"""

# Written against CloudLab's portal API (geni-lib). Outside the portal, `python profile.py`
# prints the request RSpec and takes the parameters as flags (--nodeCount=2 --useGpu=1; any
# non-empty value turns a boolean on); tools/cloudlab/profile_test.sh checks what it prints.

import re

import geni.portal as portal
import geni.rspec.pg as pg

# CloudLab's standard images, named by URN. The Debian 12 one is what the course is tested on
# (tools/setup.sh needs Debian 12's packages); if a cluster lacks it, the instantiation fails
# with "no such image" and the instructor names another one in the parameter.
DEBIAN12_IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//DEB12-64-STD"
# GPU nodes: Ubuntu 22.04, the route the handout describes for LibTorch 2.x with CUDA.
UBUNTU22_IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
# d7525 (CloudLab Wisconsin, Dell R7525): one NVIDIA GPU per node, i.e. one rank per node as
# in the handout. Chosen from public CloudLab profiles and the cluster's description; check
# CloudLab's hardware page for what your project can get (d8545 has four A100s per node).
GPU_NODE_TYPE = "d7525"
# LibTorch for GPU nodes: the torch wheel the handout uses (tools/torch_wheel.sh).
GPU_TORCH_WHEEL = "2.11.0"

CHECKOUT = "/local/distlm"
LOG = "/local/logs/distlm-setup.log"
MAX_NODES = 16  # the LAN's 10.10.1.x addresses and a course's quota, not a CloudLab limit

pc = portal.context
pc.defineParameter("nodeCount", "Number of nodes", portal.ParameterType.INTEGER, 4,
                   longDescription="One rank per node; node0 is the master (10.10.1.1). "
                   "1 to %d." % MAX_NODES)
pc.defineParameter("hardwareType", "Hardware type (optional)", portal.ParameterType.NODETYPE,
                   "", longDescription="A single CloudLab node type (e.g. c220g5, m510), or "
                   "empty to let CloudLab choose. Ignored when 'Use GPU nodes' is set.")
pc.defineParameter("useGpu", "Use GPU nodes", portal.ParameterType.BOOLEAN, False,
                   longDescription="Use the GPU node type and GPU image below, and build "
                   "against LibTorch %s (the torch wheel, CUDA) instead of Debian's."
                   % GPU_TORCH_WHEEL)
pc.defineParameter("gpuType", "GPU node type", portal.ParameterType.NODETYPE, GPU_NODE_TYPE,
                   advanced=True)
pc.defineParameter("gpuImage", "GPU disk image", portal.ParameterType.IMAGE, UBUNTU22_IMAGE,
                   advanced=True, longDescription="An Ubuntu or Debian image for the GPU "
                   "nodes. The NVIDIA driver is not part of CloudLab's standard images.")
pc.defineParameter("diskImage", "Disk image", portal.ParameterType.IMAGE, DEBIAN12_IMAGE,
                   advanced=True, longDescription="The image of the CPU nodes: Debian 12, "
                   "which tools/setup.sh expects.")
pc.defineParameter("repoUrl", "Course repository (git URL)", portal.ParameterType.STRING,
                   "https://github.com/your-course/distlm.git",
                   longDescription="Instructors: set this default to the course's public "
                   "repository before sharing the profile. Each node clones it at boot.")
pc.defineParameter("repoBranch", "Branch", portal.ParameterType.STRING, "main")
params = pc.bindParameters()

if not 1 <= params.nodeCount <= MAX_NODES:
    pc.reportError(portal.ParameterError(
        "The number of nodes must be between 1 and %d (got %d)." % (MAX_NODES, params.nodeCount),
        ["nodeCount"]))
# The URL and branch go into a shell command run as root: accept only characters that need
# no quoting there, rather than quote whatever a form field holds.
SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
if not SAFE.match(params.repoUrl):
    pc.reportError(portal.ParameterError("The repository URL may not contain spaces, quotes "
                                         "or shell characters.", ["repoUrl"]))
if not SAFE.match(params.repoBranch) or params.repoBranch.startswith("-"):
    pc.reportError(portal.ParameterError("Not a branch name: '%s'." % params.repoBranch,
                                         ["repoBranch"]))
if params.useGpu and not params.gpuType.strip():
    pc.reportError(portal.ParameterError("Name a GPU node type.", ["gpuType"]))
pc.verifyParameters()  # exits here, printing the errors, if any were reported

# The start-up command. CloudLab runs it at every boot, not necessarily as root, so it sudoes
# to root, makes the log world-readable for students, clones only when there is no checkout
# yet (a reboot keeps the student's work), and hands over to the repository's own script.
# CloudLab clones a repository-based profile's repository to /local/repository as well; this
# clone is separate so that the profile also works when pasted into the portal by hand, and so
# that the URL and branch are the parameters' and not the profile's.
env = "DISTLM_SETUP_LOG=%s" % LOG
if params.useGpu:
    env += " DISTLM_TORCH_WHEEL=%s" % GPU_TORCH_WHEEL
setup = ("mkdir -p /local/logs && chmod 755 /local/logs && touch {log} && chmod 644 {log} && "
         "{{ test -d {dir}/.git || git clone --branch {branch} {url} {dir} "
         "|| {{ echo \"distlm: FAILED at git clone, see {log}\"; exit 1; }}; }} >>{log} 2>&1 && "
         "{env} bash {dir}/tools/cloudlab/startup.sh >>{log} 2>&1").format(
             log=LOG, dir=CHECKOUT, branch=params.repoBranch, url=params.repoUrl, env=env)
command = "sudo bash -c '%s'" % setup

request = pc.makeRequestRSpec()
# One LAN for all nodes: the handout's 10.10.1.x network. A single node gets no LAN (one
# interface has nobody to talk to).
lan = request.LAN("lan") if params.nodeCount > 1 else None

for i in range(params.nodeCount):
    node = request.RawPC("node%d" % i)
    if params.useGpu:
        node.hardware_type = params.gpuType.strip()
        node.disk_image = params.gpuImage
    else:
        node.disk_image = params.diskImage
        if params.hardwareType.strip():
            node.hardware_type = params.hardwareType.strip()
    if lan is not None:
        iface = node.addInterface("if1")
        iface.addAddress(pg.IPv4Address("10.10.1.%d" % (i + 1), "255.255.255.0"))
        lan.addInterface(iface)
    node.addService(pg.Execute(shell="bash", command=command))

pc.printRequestRSpec(request)

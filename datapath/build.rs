//! Builds the eBPF programs of the kernel datapath when the `kernel` feature is on (does
//! nothing otherwise): the congestion control `ccp` (src/kernel/bpf/ccp.bpf.c) and the sockops
//! program that sets CCA and initial window per connection (src/kernel/bpf/sockops.bpf.c).
//!
//! Steps: `bpftool btf dump file /sys/kernel/btf/vmlinux format c` into `OUT_DIR/vmlinux.h`
//! (CO-RE against the running kernel), then `clang -target bpf -O2 -g` of each source into
//! `OUT_DIR/<name>.bpf.o`, which `kernel/mod.rs` and `kernel/sockops.rs` embed. Missing tools or BTF fail the build with
//! a message saying what to install. Debian packages (the Makefile's `APT_PACKAGES`): clang,
//! bpftool, libbpf-dev (BPF helper headers); libelf-dev, zlib1g-dev and pkg-config build the
//! libbpf that libbpf-rs vendors.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Each BPF source and the object it becomes in `OUT_DIR`.
const SOURCES: [(&str, &str); 2] = [
    ("src/kernel/bpf/ccp.bpf.c", "ccp.bpf.o"),
    ("src/kernel/bpf/sockops.bpf.c", "sockops.bpf.o"),
];
const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    for (src, _) in SOURCES {
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    println!("cargo:rerun-if-env-changed=CLANG");
    if env::var_os("CARGO_FEATURE_KERNEL").is_none() {
        return ExitCode::SUCCESS;
    }
    match build() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: ccp-datapath feature `kernel`: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn build() -> Result<(), String> {
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR not set")?);
    if !Path::new(BTF).exists() {
        return Err(format!(
            "{BTF} is missing: the running kernel has no BTF (CONFIG_DEBUG_INFO_BTF), so the \
             BPF program cannot be built for it. Build without `--features kernel`."
        ));
    }
    let bpftool = find_tool("BPFTOOL", "bpftool").ok_or(
        "bpftool not found (PATH, /usr/sbin, /sbin); install it: `apt-get install bpftool`, \
         or set BPFTOOL=/path/to/bpftool",
    )?;
    let clang = find_tool("CLANG", "clang").ok_or(
        "clang not found; install it: `apt-get install clang`, or set CLANG=/path/to/clang",
    )?;
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        return Err(
            "/usr/include/bpf/bpf_helpers.h not found; install `libbpf-dev` (BPF helper headers)"
                .into(),
        );
    }

    let dump = Command::new(&bpftool)
        .args(["btf", "dump", "file", BTF, "format", "c"])
        .output()
        .map_err(|e| format!("running {}: {e}", bpftool.display()))?;
    if !dump.status.success() {
        return Err(format!(
            "`{} btf dump file {BTF} format c` failed: {}",
            bpftool.display(),
            String::from_utf8_lossy(&dump.stderr)
        ));
    }
    let vmlinux = out.join("vmlinux.h");
    write_if_changed(&vmlinux, &dump.stdout)?;

    for (src, obj) in SOURCES {
        let obj = out.join(obj);
        let status = Command::new(&clang)
            .args([
                "-target", "bpf", "-O2", "-g", "-mcpu=v3", "-Wall", "-c", src,
            ])
            .arg("-I")
            .arg(&out)
            .arg("-o")
            .arg(&obj)
            .status()
            .map_err(|e| format!("running {}: {e}", clang.display()))?;
        if !status.success() {
            return Err(format!("clang failed to compile {src} ({status})"));
        }
    }
    Ok(())
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn find_tool(env_var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = env::var_os(env_var) {
        return Some(PathBuf::from(p));
    }
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

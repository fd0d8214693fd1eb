//! Works around a per-call leak in componentize-py 0.25.1 (checked against 0.25.1; harmless on
//! a release that fixes it, see below).
//!
//! componentize-py lowers Python values through `wit-dylib`: the generated bindings module asks
//! the runtime's interpreter for a `list<T>` with `wit_dylib_pop_list(cx, ty, &ptr) -> len`.
//! When the interpreter hands back a ready-made canonical buffer (`ptr != 0`; componentize-py
//! does so for every `list<u8>` given as `bytes`: its `maybe_pop_list` copies the bytes into a
//! fresh `alloc::alloc(len, 1)`), the bindings store that pointer as the lowered list and
//! nothing ever frees it: the interpreter does not register it with the call's deferred
//! deallocations, and the bindings only register the buffers they allocate themselves (the
//! `ptr == 0` branch ends in `wit_dylib_dealloc_bytes(cx, buf, size, align, defer = 1)`). So
//! every `bytes` an actor returns from `handle`, and every `bytes` payload it passes to an
//! import (`tell`, `ask`, ...), leaks its length plus malloc's header in linear memory: an echo
//! actor returning 2 KiB per call hits a 128 MiB limit after ~57k calls.
//!
//! The fix is the missing half of that `if`: after each `wit_dylib_pop_list` site whose
//! `if (ptr == 0) { ... }` has no `else`, add
//! `else { wit_dylib_dealloc_bytes(cx, ptr, len, 1, 1) }`, which hands the interpreter's buffer
//! to the call's deferred deallocations, freed with the call (post-return for an export, the end
//! of the import call for an import), i.e. exactly when the bindings free their own buffers.
//! Only `list<u8>`/`list<s8>` ever take that branch (every other element type goes through the
//! element-by-element path, `ptr == 0`), so `len` is the byte size and 1 the alignment, the
//! layout componentize-py allocated with.
//!
//! The patch matches the exact instruction shape wit-dylib emits and leaves anything else
//! untouched: a componentize-py whose bindings look different (or already have the `else`)
//! passes through unchanged, and the count of patched sites says so.

use wasm_encoder::reencode::Reencode;
use wasm_encoder::{Encode, Instruction};
use wasmparser::{Operator, Parser, Payload, TypeRef};

use crate::error::{BuildError, Result};

const POP_LIST: &str = "wit_dylib_pop_list";
const DEALLOC_BYTES: &str = "wit_dylib_dealloc_bytes";

/// Patches every wit-dylib bindings module inside `component`; returns the new bytes and the
/// number of `pop_list` sites fixed.
pub(crate) fn patch(component: &[u8]) -> Result<(Vec<u8>, usize)> {
    let mut sites = 0;
    let out = patch_component(component, &mut sites).map_err(BuildError::Component)?;
    Ok((out, sites))
}

fn leb(b: &[u8], mut i: usize) -> std::result::Result<(usize, usize), String> {
    let (mut r, mut s) = (0usize, 0);
    loop {
        let x = *b.get(i).ok_or("truncated component")?;
        i += 1;
        r |= usize::from(x & 0x7f) << s;
        s += 7;
        if x < 0x80 {
            return Ok((r, i));
        }
    }
}

/// Copies a component section by section, rewriting core modules (section 1) and recursing into
/// nested components (section 4).
fn patch_component(b: &[u8], sites: &mut usize) -> std::result::Result<Vec<u8>, String> {
    if b.len() < 8 {
        return Err("not a component".into());
    }
    let mut out = b[..8].to_vec();
    let mut i = 8;
    while i < b.len() {
        let id = b[i];
        let (n, start) = leb(b, i + 1)?;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= b.len())
            .ok_or("bad section")?;
        let body = &b[start..end];
        let new = match id {
            1 => patch_module(body, sites)?,
            4 => Some(patch_component(body, sites)?),
            _ => None,
        };
        match new {
            Some(new) => {
                out.push(id);
                new.len().encode(&mut out);
                out.extend_from_slice(&new);
            }
            None => out.extend_from_slice(&b[i..end]),
        }
        i = end;
    }
    Ok(out)
}

/// `Some(new module)` when `m` imports both intrinsics and at least one site was patched.
fn patch_module(m: &[u8], sites: &mut usize) -> std::result::Result<Option<Vec<u8>>, String> {
    let (mut pop_list, mut dealloc, mut funcs) = (None, None, 0u32);
    for payload in Parser::new(0).parse_all(m) {
        match payload.map_err(|e| e.to_string())? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    let imp = imp.map_err(|e| e.to_string())?;
                    if let TypeRef::Func(_) = imp.ty {
                        match (imp.module, imp.name) {
                            ("env", POP_LIST) => pop_list = Some(funcs),
                            ("env", DEALLOC_BYTES) => dealloc = Some(funcs),
                            _ => {}
                        }
                        funcs += 1;
                    }
                }
            }
            Payload::CodeSectionStart { .. } => break,
            _ => {}
        }
    }
    let (Some(pop_list), Some(dealloc)) = (pop_list, dealloc) else {
        return Ok(None);
    };
    let mut p = Patcher {
        pop_list,
        dealloc,
        sites: 0,
    };
    let mut module = wasm_encoder::Module::new();
    p.parse_core_module(&mut module, Parser::new(0), m)
        .map_err(|e| format!("re-encoding the bindings module: {e:?}"))?;
    if p.sites == 0 {
        return Ok(None);
    }
    *sites += p.sites;
    Ok(Some(module.finish()))
}

struct Patcher {
    pop_list: u32,
    dealloc: u32,
    sites: usize,
}

/// A `pop_list` call being followed to its `if (ptr == 0)`.
#[derive(Clone, Copy)]
struct Pending {
    cx: u32,
    len: Option<u32>,
    /// Operators seen since the call; the shape is short, so give up after a few.
    seen: usize,
}

/// An open `if (ptr == 0)` that gets an `else` at its `end`.
struct Open {
    cx: u32,
    len: u32,
    ptr: u32,
    depth: usize,
}

impl Reencode for Patcher {
    type Error = std::convert::Infallible;

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        func: wasmparser::FunctionBody<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        let mut f = self.new_function_with_parsed_locals(&func)?;
        let mut reader = func.get_operators_reader()?;
        // The last few operators, for the call's first argument and the `if`'s condition.
        let mut recent: Vec<Operator<'_>> = Vec::new();
        let mut pending: Option<Pending> = None;
        let mut open: Vec<Open> = Vec::new();
        let mut depth = 0usize;
        while !reader.eof() {
            let op = reader.read()?;
            match &op {
                Operator::Block { .. }
                | Operator::Loop { .. }
                | Operator::TryTable { .. }
                | Operator::Try { .. } => depth += 1,
                Operator::If { blockty } => {
                    depth += 1;
                    if let Some((cx, len, ptr)) = site(&recent, pending, *blockty) {
                        open.push(Open {
                            cx,
                            len,
                            ptr,
                            depth,
                        });
                    }
                    pending = None;
                }
                // Already has an else: leave it alone.
                Operator::Else if open.last().is_some_and(|o| o.depth == depth) => {
                    open.pop();
                }
                Operator::End => {
                    if open.last().is_some_and(|o| o.depth == depth) {
                        let o = open.pop().expect("checked");
                        f.instruction(&Instruction::Else);
                        f.instruction(&Instruction::LocalGet(o.cx));
                        f.instruction(&Instruction::LocalGet(o.ptr));
                        f.instruction(&Instruction::LocalGet(o.len));
                        f.instruction(&Instruction::I32Const(1));
                        f.instruction(&Instruction::I32Const(1));
                        f.instruction(&Instruction::Call(self.dealloc));
                        self.sites += 1;
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
            // Follow a pop_list call: `local.get cx; <ty>; <ptr arg: 3 ops>; call pop_list;
            // local.set len; ...; local.get ptr; i32.eqz; if`.
            match &op {
                Operator::Call { function_index } if *function_index == self.pop_list => {
                    pending = match recent.len().checked_sub(5).map(|i| &recent[i]) {
                        Some(Operator::LocalGet { local_index }) => Some(Pending {
                            cx: *local_index,
                            len: None,
                            seen: 0,
                        }),
                        _ => None,
                    };
                }
                Operator::LocalSet { local_index } if pending.is_some_and(|p| p.seen == 0) => {
                    if let Some(p) = pending.as_mut() {
                        p.len = Some(*local_index);
                        p.seen = 1;
                    }
                }
                Operator::If { .. } => {}
                _ => {
                    if let Some(p) = pending.as_mut() {
                        if p.seen == 0 {
                            pending = None; // the length was not stored in a local
                        } else {
                            p.seen += 1;
                            if p.seen > 12 {
                                pending = None;
                            }
                        }
                    }
                }
            }
            f.instruction(&self.instruction(op.clone())?);
            recent.push(op);
            if recent.len() > 8 {
                recent.remove(0);
            }
        }
        code.function(&f);
        Ok(())
    }
}

/// `(cx, len, ptr)` when an `if` closes the shape a `pop_list` call started:
/// `local.get ptr; i32.eqz; if` with no result.
fn site(
    recent: &[Operator<'_>],
    pending: Option<Pending>,
    blockty: wasmparser::BlockType,
) -> Option<(u32, u32, u32)> {
    let Pending {
        cx, len: Some(len), ..
    } = pending?
    else {
        return None;
    };
    match (blockty, recent) {
        (
            wasmparser::BlockType::Empty,
            [
                ..,
                Operator::LocalGet { local_index: ptr },
                Operator::I32Eqz,
            ],
        ) => Some((cx, len, *ptr)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{
        CodeSection, EntityType, Function, FunctionSection, ImportSection, MemArg, Module,
        TypeSection, ValType,
    };

    const I32: ValType = ValType::I32;

    /// A component holding one module shaped like wit-dylib's bindings: locals 0 = cx,
    /// 1 = scratch, 2 = len, 3 = ptr.
    fn component(with_else: bool) -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([I32; 3], [I32]);
        types.ty().function([I32; 5], []);
        types.ty().function([I32; 2], []);
        let mut imports = ImportSection::new();
        imports.import(
            "env",
            "memory",
            wasm_encoder::MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            },
        );
        imports.import("env", POP_LIST, EntityType::Function(0));
        imports.import("env", DEALLOC_BYTES, EntityType::Function(1));
        let mut funcs = FunctionSection::new();
        funcs.function(2);
        let mem = MemArg {
            offset: 0,
            align: 2,
            memory_index: 0,
        };
        let mut f = Function::new([(2, I32)]);
        for i in [
            Instruction::LocalGet(0),
            Instruction::I32Const(0),
            Instruction::LocalGet(1),
            Instruction::I32Const(80),
            Instruction::I32Add,
            Instruction::Call(0),
            Instruction::LocalSet(2),
            Instruction::LocalGet(1),
            Instruction::I32Load(mem),
            Instruction::LocalSet(3),
            Instruction::LocalGet(3),
            Instruction::I32Eqz,
            Instruction::If(wasm_encoder::BlockType::Empty),
            Instruction::Nop,
        ] {
            f.instruction(&i);
        }
        if with_else {
            f.instruction(&Instruction::Else);
        }
        f.instruction(&Instruction::End);
        f.instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&f);
        let mut m = Module::new();
        m.section(&types)
            .section(&imports)
            .section(&funcs)
            .section(&code);
        let m = m.finish();
        let mut c = b"\0asm\x0d\x00\x01\x00".to_vec();
        c.push(1);
        m.len().encode(&mut c);
        c.extend_from_slice(&m);
        c
    }

    fn operators(component: &[u8]) -> Vec<String> {
        let (n, start) = leb(component, 9).unwrap();
        let m = &component[start..start + n];
        let mut ops = Vec::new();
        for p in Parser::new(0).parse_all(m) {
            if let Payload::CodeSectionEntry(body) = p.unwrap() {
                for op in body.get_operators_reader().unwrap() {
                    ops.push(format!("{:?}", op.unwrap()));
                }
            }
        }
        ops
    }

    #[test]
    fn adds_the_missing_else_that_frees_the_interpreters_buffer() {
        let (out, sites) = patch(&component(false)).unwrap();
        assert_eq!(sites, 1);
        let ops = operators(&out);
        let tail: Vec<&str> = ops[ops.len() - 9..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "Else",
                "LocalGet { local_index: 0 }",
                "LocalGet { local_index: 3 }",
                "LocalGet { local_index: 2 }",
                "I32Const { value: 1 }",
                "I32Const { value: 1 }",
                "Call { function_index: 1 }",
                "End",
                "End"
            ]
        );
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(&out)
            .unwrap();
        // Idempotent: the patched site now has its else.
        assert_eq!(patch(&out).unwrap().1, 0);
    }

    #[test]
    fn leaves_an_existing_else_and_other_modules_alone() {
        let input = component(true);
        let (out, sites) = patch(&input).unwrap();
        assert_eq!(sites, 0);
        assert_eq!(out, input);
    }
}

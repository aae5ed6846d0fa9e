//! setattr, extended attributes and range fsync (docs/api.md, "Files";
//! proto/cowkv/v1/files.proto SetAttr, SetXattr, GetXattr, ListXattrs,
//! RemoveXattr and Fsync's offset and length).

use crate::error::Result;
use crate::files::{FileStat, Files};
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

/// setxattr(2) flag: fail with `AlreadyExists` (EEXIST) if the name is set.
pub const XATTR_CREATE: u32 = 1;
/// setxattr(2) flag: fail with `NotFound` (ENODATA) if the name is not set.
pub const XATTR_REPLACE: u32 = 2;

/// A setattr request, from [`Files::set_attr`]: name the attributes to
/// change, then `.send().await` for the attributes afterwards. An attribute
/// not named is kept; ctime becomes now when anything changes.
///
/// ```no_run
/// # async fn f(files: cowkv::Files) -> cowkv::Result<()> {
/// let st = files.set_attr("/f").mode(0o600).uid(1000).mtime_now().send().await?;
/// # Ok(()) }
/// ```
#[must_use = "a SetAttr does nothing until .send().await"]
pub struct SetAttr {
    rpc: Rpc,
    req: pb::SetAttrRequest,
}

impl SetAttr {
    /// This request's deadline, instead of the client's default (the call
    /// ends with [`crate::Error::DeadlineExceeded`] when it passes).
    pub fn timeout(mut self, d: std::time::Duration) -> Self {
        self.rpc = self.rpc.with_timeout(d);
        self
    }

    fn field(mut self, f: pb::SetAttrField) -> SetAttr {
        self.req.fields |= f as u32;
        self
    }
    /// Permission bits (at most 0o7777; EINVAL beyond).
    pub fn mode(mut self, mode: u32) -> SetAttr {
        self.req.mode = mode;
        self.field(pb::SetAttrField::SetAttrMode)
    }
    pub fn uid(mut self, uid: u32) -> SetAttr {
        self.req.uid = uid;
        self.field(pb::SetAttrField::SetAttrUid)
    }
    pub fn gid(mut self, gid: u32) -> SetAttr {
        self.req.gid = gid;
        self.field(pb::SetAttrField::SetAttrGid)
    }
    /// A truncate (regular files).
    pub fn size(mut self, size: u64) -> SetAttr {
        self.req.size = size;
        self.field(pb::SetAttrField::SetAttrSize)
    }
    /// Access time, ns since the epoch.
    pub fn atime_ns(mut self, ns: i64) -> SetAttr {
        self.req.atime_ns = ns;
        self.field(pb::SetAttrField::SetAttrAtime)
    }
    /// Modification time, ns since the epoch.
    pub fn mtime_ns(mut self, ns: i64) -> SetAttr {
        self.req.mtime_ns = ns;
        self.field(pb::SetAttrField::SetAttrMtime)
    }
    /// Access time = the server's clock (utimensat's UTIME_NOW).
    pub fn atime_now(self) -> SetAttr {
        self.field(pb::SetAttrField::SetAttrAtimeNow)
    }
    /// Modification time = the server's clock.
    pub fn mtime_now(self) -> SetAttr {
        self.field(pb::SetAttrField::SetAttrMtimeNow)
    }
    /// The FATTR_* mask this request sends.
    pub fn fields(&self) -> u32 {
        self.req.fields
    }
    /// Sends it; the file's attributes afterwards.
    pub async fn send(self) -> Result<FileStat> {
        validate::path("setattr", "path", &self.req.path)?;
        Ok(Rpc::unary("setattr", self.rpc.files().set_attr(self.rpc.request(self.req, None))).await?.into())
    }
}

impl Files {
    /// A setattr of `path` (chmod, chown, truncate and utimensat in one call).
    pub fn set_attr(&self, path: &str) -> SetAttr {
        let req = pb::SetAttrRequest { subvolume: self.sv(), path: path.into(), ..Default::default() };
        SetAttr { rpc: self.rpc().clone(), req }
    }

    /// Sets an extended attribute; `flags` 0, [`XATTR_CREATE`] or [`XATTR_REPLACE`].
    pub async fn set_xattr(&self, path: &str, name: &str, value: impl AsRef<[u8]>, flags: u32) -> Result<()> {
        validate::path("setxattr", "path", path)?;
        let req = pb::SetXattrRequest {
            subvolume: self.sv(),
            path: path.into(),
            name: name.into(),
            value: bytes::Bytes::copy_from_slice(value.as_ref()),
            flags,
            ..Default::default()
        };
        Rpc::unary("setxattr", self.rpc().files().set_xattr(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// An extended attribute's value; `NotFound` (errno ENODATA) if it is not set.
    pub async fn get_xattr(&self, path: &str, name: &str) -> Result<bytes::Bytes> {
        validate::path("getxattr", "path", path)?;
        let req =
            pb::GetXattrRequest { subvolume: self.sv(), path: path.into(), name: name.into(), ..Default::default() };
        Ok(self
            .rpc()
            .idempotent("getxattr", self.rpc().deadline, |t| {
                let mut c = self.rpc().files();
                let r = self.rpc().request_exact(req.clone(), t);
                async move { c.get_xattr(r).await }
            })
            .await?
            .value)
    }

    /// The names of a file's extended attributes, sorted.
    pub async fn list_xattrs(&self, path: &str) -> Result<Vec<String>> {
        validate::path("listxattr", "path", path)?;
        let req = pb::ListXattrsRequest { subvolume: self.sv(), path: path.into(), ..Default::default() };
        Ok(self
            .rpc()
            .idempotent("listxattr", self.rpc().deadline, |t| {
                let mut c = self.rpc().files();
                let r = self.rpc().request_exact(req.clone(), t);
                async move { c.list_xattrs(r).await }
            })
            .await?
            .names)
    }

    /// Removes an extended attribute; `NotFound` (errno ENODATA) if it is not set.
    pub async fn remove_xattr(&self, path: &str, name: &str) -> Result<()> {
        validate::path("removexattr", "path", path)?;
        let req =
            pb::RemoveXattrRequest { subvolume: self.sv(), path: path.into(), name: name.into(), ..Default::default() };
        Rpc::unary("removexattr", self.rpc().files().remove_xattr(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// A range fsync (sync_file_range): at least the data of
    /// `[offset, offset + length)` is durable when it returns (`length` 0 =
    /// to EOF; the server syncs the whole file today).
    pub async fn fsync_range(&self, path: &str, datasync: bool, offset: u64, length: u64) -> Result<()> {
        validate::path("fsync", "path", path)?;
        let req = pb::FsyncRequest {
            subvolume: self.sv(),
            path: path.into(),
            datasync,
            offset,
            length,
            ..Default::default()
        };
        Rpc::unary("fsync", self.rpc().files().fsync(self.rpc().request(req, None))).await?;
        Ok(())
    }
}

/// fallocate(2) mode: keep the size (the range may lie past EOF).
pub const FALLOC_FL_KEEP_SIZE: u32 = 0x01;
/// fallocate(2) mode: make the range a hole (with [`FALLOC_FL_KEEP_SIZE`]).
pub const FALLOC_FL_PUNCH_HOLE: u32 = 0x02;
/// fallocate(2) mode: make the range read as zeros (preallocated extents).
pub const FALLOC_FL_ZERO_RANGE: u32 = 0x10;

impl Files {
    /// fallocate(2) on a regular file: with `mode` 0 the range's holes get
    /// preallocated extents (reading as zeros, unwritten in `fiemap`) and the
    /// file grows to `offset + length`; `mode` is made of `FALLOC_FL_*`
    /// ([`FALLOC_FL_PUNCH_HOLE`] needs [`FALLOC_FL_KEEP_SIZE`]). Punch hole
    /// with zero range, or `length` 0, is InvalidArgument (EINVAL); a full
    /// device NoSpace with nothing changed. Returns the file's attributes.
    pub async fn fallocate(&self, path: &str, offset: u64, length: u64, mode: u32) -> Result<FileStat> {
        validate::path("fallocate", "path", path)?;
        let req = pb::FallocateRequest {
            subvolume: self.sv(),
            path: path.into(),
            mode,
            offset,
            length,
            ..Default::default()
        };
        Ok(Rpc::unary("fallocate", self.rpc().files().fallocate(self.rpc().request(req, None))).await?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setter sends its FATTR_* bit and nothing else (a lazy channel:
    /// nothing is sent).
    #[tokio::test]
    async fn set_attr_sends_exactly_the_fields_named() {
        let rpc = Rpc::new(&crate::Options::new("127.0.0.1:1")).unwrap();
        let req = || SetAttr { rpc: rpc.clone(), req: pb::SetAttrRequest::default() };
        assert_eq!(req().fields(), 0);
        assert_eq!(req().mode(0o600).fields(), 1);
        assert_eq!(req().uid(7).fields(), 2);
        assert_eq!(req().gid(7).fields(), 4);
        assert_eq!(req().size(5).fields(), 8);
        assert_eq!(req().atime_ns(1).fields(), 16);
        assert_eq!(req().mtime_ns(1).fields(), 32);
        assert_eq!(req().atime_now().fields(), 128);
        assert_eq!(req().mtime_now().fields(), 256);
        let r = req().mode(0o600).size(5).atime_ns(1_000_000_002);
        assert_eq!((r.fields(), r.req.mode, r.req.size, r.req.atime_ns, r.req.uid), (25, 0o600, 5, 1_000_000_002, 0));
    }
}

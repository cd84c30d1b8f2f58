import java.sql.*;

public class JdbcProbe {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE j (id INT PRIMARY KEY, name STRING, score DECIMAL)");
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO j VALUES (?, ?, ?)")) {
                for (int i = 1; i <= 3; i++) {
                    p.setInt(1, i);
                    p.setString(2, "n" + i);
                    p.setBigDecimal(3, new java.math.BigDecimal(i + ".5"));
                    p.executeUpdate();
                }
            }
            try (PreparedStatement p = c.prepareStatement("SELECT id, name, score FROM j WHERE id >= ? ORDER BY id")) {
                p.setInt(1, 2);
                try (ResultSet r = p.executeQuery()) {
                    while (r.next()) System.out.println("row " + r.getLong(1) + " " + r.getString(2) + " " + r.getBigDecimal(3));
                }
            }
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) { s.executeUpdate("UPDATE j SET name = 'x' WHERE id = 1"); }
            c.rollback();
            c.setAutoCommit(true);
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT name FROM j WHERE id = 1")) {
                r.next(); System.out.println("after rollback " + r.getString(1));
            }
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            try (ResultSet r = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
                while (r.next()) System.out.println("table " + r.getString("TABLE_NAME"));
            }
            try (ResultSet r = md.getColumns(null, "public", "j", "%")) {
                while (r.next()) System.out.println("column " + r.getString("COLUMN_NAME") + " " + r.getString("TYPE_NAME"));
            }
            try (ResultSet r = md.getPrimaryKeys(null, "public", "j")) {
                while (r.next()) System.out.println("pk " + r.getString("COLUMN_NAME"));
            }
            application(c, md);
        }
    }

    // What an application does past the basics: batches (rewritten into one INSERT by
    // reWriteBatchedInserts=true), generated keys, dates and times as the driver sends
    // them (with a time zone), arrays, a fetch size in a transaction, and the metadata
    // of indexes, foreign keys, types and schemas.
    static void application(Connection c, DatabaseMetaData md) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE k (id INT PRIMARY KEY DEFAULT unique_rowid(), jid INT REFERENCES j (id) ON DELETE CASCADE, day DATE, at TIME, ts TIMESTAMP, xs INT[], UNIQUE INDEX k_day (day))");
        }
        try (PreparedStatement p = c.prepareStatement("INSERT INTO k (jid, day, at, ts, xs) VALUES (?, ?, ?, ?, ?)", Statement.RETURN_GENERATED_KEYS)) {
            for (int i = 1; i <= 3; i++) {
                p.setInt(1, i);
                p.setDate(2, java.sql.Date.valueOf("2024-02-2" + i));
                p.setTime(3, Time.valueOf("01:02:0" + i));
                p.setTimestamp(4, Timestamp.valueOf("2024-01-02 03:04:05.5"));
                p.setArray(5, c.createArrayOf("int8", new Long[] {(long) i, null}));
                p.addBatch();
            }
            int rows = 0;
            for (int n : p.executeBatch()) rows += n == Statement.SUCCESS_NO_INFO ? 1 : n;
            int keys = 0;
            try (ResultSet r = p.getGeneratedKeys()) { while (r.next()) if (r.getLong("id") > 0) keys++; }
            System.out.println("batch " + rows + " keys " + keys);
        }
        c.setAutoCommit(false);
        try (PreparedStatement p = c.prepareStatement("SELECT day, at, ts, xs FROM k WHERE jid >= ? ORDER BY jid")) {
            p.setFetchSize(2);
            p.setInt(1, 1);
            try (ResultSet r = p.executeQuery()) {
                ResultSetMetaData rm = r.getMetaData();
                StringBuilder types = new StringBuilder("types");
                for (int i = 1; i <= rm.getColumnCount(); i++) types.append(" ").append(rm.getColumnTypeName(i));
                System.out.println(types);
                while (r.next()) {
                    Object[] xs = (Object[]) r.getArray(4).getArray();
                    System.out.println("k " + r.getDate(1) + " " + r.getTime(2) + " " + r.getTimestamp(3) + " " + java.util.Arrays.toString(xs));
                }
            }
        }
        c.commit();
        c.setAutoCommit(true);
        // past prepareThreshold (5) the driver names the statement on the server and
        // reads its results in binary
        try (PreparedStatement p = c.prepareStatement("SELECT jid, day, ts FROM k WHERE jid = ?")) {
            String last = "";
            for (int i = 0; i < 6; i++) {
                p.setObject(1, 1 + i % 3);
                try (ResultSet r = p.executeQuery()) {
                    r.next();
                    last = r.getInt(1) + " " + r.getObject(2, java.time.LocalDate.class) + " " + r.getObject(3, java.time.LocalDateTime.class);
                }
            }
            System.out.println("prepared " + last);
        }
        try (ResultSet r = md.getIndexInfo(null, "public", "k", false, false)) {
            while (r.next()) System.out.println("index " + r.getString("INDEX_NAME") + " " + r.getBoolean("NON_UNIQUE") + " " + r.getString("COLUMN_NAME") + " " + r.getString("ASC_OR_DESC"));
        }
        try (ResultSet r = md.getImportedKeys(null, "public", "k")) {
            while (r.next()) System.out.println("fk " + r.getString("FKCOLUMN_NAME") + " -> " + r.getString("PKTABLE_NAME") + "." + r.getString("PKCOLUMN_NAME") + " " + r.getString("PK_NAME") + " delete " + r.getShort("DELETE_RULE"));
        }
        try (ResultSet r = md.getSchemas()) {
            StringBuilder schemas = new StringBuilder("schemas");
            while (r.next()) schemas.append(" ").append(r.getString("TABLE_SCHEM"));
            System.out.println(schemas);
        }
        try (ResultSet r = md.getTypeInfo()) {
            java.util.Set<String> names = new java.util.TreeSet<>();
            while (r.next()) names.add(r.getString("TYPE_NAME"));
            System.out.println("types int8 " + names.contains("int8") + " _int8 " + names.contains("_int8"));
        }
    }
}

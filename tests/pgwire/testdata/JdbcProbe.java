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
        }
    }
}
